"""cluster facts: offer.interconnect/network (with speeds and their basis), cluster_reference

offer.interconnect, interconnect_gbps: what connects the GPUs inside the node and its GB/s
per GPU; offer.network, network_gbps: what connects nodes and its Gb/s per node;
offer.cluster_basis: where each of the four comes from (source, reference or unknown).
All null on existing offers until their next crawl (null = unknown, never guessed).
cluster_reference: the reviewed per-family facts (fixtures/reference/interconnects.yaml).

Revision ID: 0019
Revises: 0017
Create Date: 2026-12-04 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import schema.types

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OFFER_COLUMNS = ("interconnect", "interconnect_gbps", "network", "network_gbps", "cluster_basis")


def upgrade() -> None:
    # plain ADD COLUMN on both databases: a batch on SQLite would recreate offer, which
    # observations reference
    op.add_column("offer", sa.Column("interconnect", sa.String(length=16), nullable=True))
    op.add_column(
        "offer", sa.Column("interconnect_gbps", schema.types.DecimalType(), nullable=True)
    )
    op.add_column("offer", sa.Column("network", sa.String(length=16), nullable=True))
    op.add_column("offer", sa.Column("network_gbps", schema.types.DecimalType(), nullable=True))
    op.add_column("offer", sa.Column("cluster_basis", sa.String(length=4), nullable=True))
    op.create_table(
        "cluster_reference",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("sku", sa.String(length=200), nullable=False),
        sa.Column("sku_prefix", sa.String(length=200), nullable=False),
        sa.Column("interconnect", sa.String(length=16), nullable=True),
        sa.Column("interconnect_gbps", schema.types.DecimalType(), nullable=True),
        sa.Column("network", sa.String(length=16), nullable=True),
        sa.Column("network_gbps", schema.types.DecimalType(), nullable=True),
        sa.Column("source_url", sa.String(length=1000), nullable=False),
        sa.Column("checked", sa.Date(), nullable=False),
        sa.Column("notes", sa.String(length=2000), nullable=True),
        sa.ForeignKeyConstraint(
            ["provider"], ["provider.slug"], name=op.f("fk_cluster_reference_provider_provider")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cluster_reference")),
        sa.UniqueConstraint(
            "provider",
            "sku",
            "sku_prefix",
            name=op.f("uq_cluster_reference_provider_sku_sku_prefix"),
        ),
    )
    op.create_index(
        op.f("ix_cluster_reference_provider"), "cluster_reference", ["provider"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_cluster_reference_provider"), table_name="cluster_reference")
    op.drop_table("cluster_reference")
    if op.get_bind().dialect.name == "sqlite":
        # a plain DROP COLUMN: batch mode would recreate offer, which observations reference
        for column in reversed(OFFER_COLUMNS):
            op.execute(f"ALTER TABLE offer DROP COLUMN {column}")
        return
    for column in reversed(OFFER_COLUMNS):
        op.drop_column("offer", column)
