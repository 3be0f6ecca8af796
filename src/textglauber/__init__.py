"""textglauber: Glauber dynamics on masked language models.

The library behind the reproducible book of *Mixing Times of Glauber Dynamics on
Masked Language Models* (arXiv 2605.16378). One module per concept of the preprint:

- ``models``      masked and causal LMs: naming, checking, loading and scoring them (hub name,
                  local path, installed package, and tiny deterministic ones for tests and smoke)
- ``vocabulary``  the allowed vocabulary A
- ``chain``       the batched Glauber engine (checkpoint, resume, records)
- ``rectangle``   the rectangle incompatibility test and its K x K grid
- ``exact``       exact kernels of tiny chains by enumeration
- ``stats``       bootstrap intervals
- ``results``     parquet + manifest writing
- ``params``      profile files and parameter validation
- ``device``      the one place where device and dtype are decided
"""

__version__ = "0.1.0"
