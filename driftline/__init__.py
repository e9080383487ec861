"""The composition root: the FastAPI app factory and lifespan, every REST router, the job
registry, the ``driftline`` CLI, the configuration reference and the demo. The only package that
imports all the others.
"""
