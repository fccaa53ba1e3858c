"""An offer's identity key, its status values and the column tuples ingest writes
(and the alert outbox reads).
"""

from __future__ import annotations

from schema.enums import OfferStatus

# Offer columns that describe the SKU; a change of these alone updates the row in place.
ATTRIBUTES = (
    "price_per",
    "gpu_slug",
    "gpu_inferred",
    "gpu_name_raw",
    "gpu_count",
    "gpu_memory_gb",
    "vcpus",
    "memory_gb",
    "country",
    "bare_metal",
    "price_floor",
    "source_url",
    "tax_included",
    # the cluster facts (service.catalog.cluster), resolved with the reference data
    "interconnect",
    "interconnect_gbps",
    "network",
    "network_gbps",
    "cluster_basis",
)
ATTRIBUTES_BEFORE_CLUSTER = ATTRIBUTES.index("interconnect")
"""How many attributes offers had before the cluster facts (see resolver.fingerprint)."""
GPU_SLUG = ATTRIBUTES.index("gpu_slug")
"""Where an offer's GPU model is in its attributes (the PFLOPS sort key depends on it)."""

KEY_COLUMNS = ("provider", "sku", "region", "price_kind", "unit")
"""An offer's identity within its source, in the order of the unique key (after
``source``)."""
Key = str
"""An offer's identity within its source: its :data:`KEY_COLUMNS` joined by KEY_SEP
(validated text never holds control characters)."""
KEY_SEP = "\x1f"
join_key = KEY_SEP.join

ACTIVE, WITHDRAWN = OfferStatus.active.value, OfferStatus.withdrawn.value

OFFER_COLUMNS = (
    "id",
    "provider",
    "sku",
    "region",
    "price_kind",
    "unit",
    *ATTRIBUTES,
    "fingerprint",
    "amount",
    "currency",
    "gpu_hour_usd",
    "gpu_hour_usd_e10",
    "hourly_usd_e10",
    "pflop_hour_usd_e10",
    "observation_id",
)
"""A new offer's row, as built (its key's parts, attributes, price, observation); the
columns every new offer of an ingest shares are constants of the insert."""
OBS_COLUMNS = (
    "id",
    "offer_id",
    "amount",
    "currency",
    "hourly_amount",
    "amount_usd",
    "hourly_usd",
    "gpu_hour_usd",
    "fx_rate",
    "fx_date",
    "payload_id",
)
"""An observation's row, as built and as the outbox reads it (``gpu_hour_usd`` is a
Decimal there); version_from is a constant of the insert, and valid_from and crawl_run_id
are left null: the version's (schema.prices.VERSIONS_OWN)."""


TOUCHED_COLUMNS = ("id", *ATTRIBUTES, "fingerprint")
PRICE_COLUMNS = (
    "amount",
    "currency",
    "observation_id",
    "gpu_hour_usd",
    "gpu_hour_usd_e10",
    "hourly_usd_e10",
    "pflop_hour_usd_e10",
    "last_changed_at",
    "last_changed_version",
)
REPRICED_ONLY_COLUMNS = ("id", *PRICE_COLUMNS)
"""What a new price of an active offer with the same attributes sets: on SQLite, the
indexes of no other column (country, GPU count, provider, identity) are touched."""
REPRICED_COLUMNS = (*TOUCHED_COLUMNS, "status", *PRICE_COLUMNS, "withdrawn_at", "withdrawn_version")
