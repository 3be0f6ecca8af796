"""Profiles: a profile file ``params/NAME.yaml``, its declared schema, and the parameters each chapter
runs with. One module per concept:

- :mod:`.errors`     the name rule, :class:`ProfileError`, how a message names a file and shows a value
- :mod:`.values`     the value types keys are declared with, the markers of what a value names, the
                     library's limits the schema states
- :mod:`.entries`    the profile file's models and the model entries chapters hold
- :mod:`.chapters`   each chapter's model (:data:`CHAPTERS`) and the sections it holds
- :mod:`.notebooks`  a notebook's parameters cell, and whether it matches its model
- :mod:`.refs`       the models a chapter's parameters name (:func:`model_refs`)
- :mod:`.messages`   a validation error as one line
- :mod:`.checks`     the checks of a profile, and of a chapter's values against its model
- :mod:`.strict`     reading a profile file: bounded, no aliases, no key twice
- :mod:`.loader`     reading a profile (``derive`` applied), the parameters papermill injects, and
                     ``python -m textglauber.profile PROFILE CHAPTER``
- :mod:`.kernel`     what a chapter's kernel checks first (:func:`check_chapter`)

The schema: every key, its type, its range and the relations between keys.

A profile (``params/NAME.yaml``) is checked in full before anything is loaded, by the build
(``python -m textglauber.bookbuild``) and by ``python -m textglauber.profile``: the top-level keys
(:class:`Profile`, or :class:`DerivedProfile` for one that ``derive:``s from another), the
``defaults``, each chapter's entry, and each chapter's parameters as papermill will inject them
(the profile's ``defaults`` under the chapter's ``parameters``, after
``derive``/``replace``/``sizes``, the schema's default where neither sets a key), against the
model declared for that notebook in :data:`CHAPTERS`.

Every model forbids keys it does not declare, at every level, and takes its types strictly:
no string for a number, no bool for an integer, no float for an integer, no NaN or infinity.
A chapter's model declares exactly the names of its notebook's parameters cell (the build
refuses a notebook whose cell and model differ), so a notebook run through the build can
receive no parameter it does not declare. The cell holds no values: every name but ``profile``
and ``results_root`` is None there, which the kernel reads as "the profile's value"
(:func:`check_chapter`), so a value has one home, the profile file (or the schema's default). The checks the notebooks and the library make at run
time on the parameters alone (``fixed_t`` within the hitting-time budget, ``window`` spanning
two records, ``steps`` a multiple of ``score_every``, ...) are relations here, so they fail
before a model loads; what depends on a model or a corpus (a window longer than the corpus
holds, a token the vocabulary lacks) is the pre-flight's (:mod:`textglauber.bookbuild.preflight`), over
every model the parameters name, at any depth: :func:`model_refs` finds them by their types
(:class:`ModelEntry`, the strings marked :class:`NamesModels`) with the tokens and lengths asked of each.

A problem is one line: ``params/smoke.yaml: chapter 'incompatibility': temperature = nan: must
be a finite number > 0`` (:func:`check_profile` raises :class:`ProfileError` with
one line per problem).
"""
from .chapters import (CHAPTERS, Chapter, Cost, Escape, EscapeGrowth, EscapeLength, Holding, IsingFit, IsingSeparation,
                       Phase, Traps, seed_topics_available)
from .checks import (DEFAULT_KEYS, INJECTED, artifact_problems, chapter_problems, check_raw, check_values,
                     profile_problems, unknown_parameters)
from .entries import (BoundsModel, Closed, Control, EmbeddedModel, ExactModel, IncompatibilityModel, ModelEntry,
                      ModelSpec, PhaseModel, entry_name, is_model_entry, relation)
from .errors import NAME_RE, ProfileError, show, where
from .kernel import anchored_results, check_chapter, profile_values
from .loader import (build_order, chapter_notebooks, chapter_parameters, check_profile, derive, load_profile, main,
                     params_dir, profile_path, profiles, validate_or_exit)
from .messages import explain, problems
from .notebooks import notebook_parameters, schema_mismatch
from .refs import ModelRef, corpus_names, model_refs, refs_in
from .values import (ARTIFACTS, CONTENT_LENGTH, MAX_SPINS, MAX_STATES, NULL_SEEDS, PHASE_MAX_N, PHASE_TMIX_MAX_STATES,
                     TRAINING_PRESETS, Embedder, Length, ListOf, NamesModels, PosInt, TopicScorer, TrainingRun)
