"""The error of a bad reference file or row, shared by the catalog's reference loader
(:mod:`service.catalog.reference`) and the compliance one (:mod:`service.compliance.load`),
so neither imports the other."""


class ReferenceError(Exception):
    """A reference file or row is invalid; the message names where."""
