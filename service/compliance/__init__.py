"""Compliance: certifications, data residency (GDPR zones) and export-control evaluation.

Pure logic lives in ``residency``, ``export_control`` and ``certifications``; ``load`` reads
the reviewed reference files; ``filters`` resolves listing filters to plain sets.
"""

NOTICE = (
    "Informational, not legal advice: derived from public sources cited here, which may be "
    "incomplete or out of date. Confirm with the official texts or counsel before acting."
)
