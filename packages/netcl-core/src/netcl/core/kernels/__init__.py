"""Kernel codegen (``primitives``) and the program cache (``cache``)."""
