"""Page text of the chapters (sentences computed from results), apart from the computation.
One module per chapter, named after it."""
