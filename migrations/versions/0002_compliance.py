"""Compliance: country lists, versioned rule sets and GPU classifications.

``export_rule_set`` and ``gpu_classification`` were created empty by 0001 and nothing wrote
them before this revision, so they are recreated (a rule set is now versioned: surrogate id,
``recorded_at``/``superseded_at``) instead of altered in place.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 22:38:44.846547
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import schema.types

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _versioned() -> list[sa.Column]:  # type: ignore[type-arg]
    return [
        sa.Column("recorded_at", schema.types.UTCDateTime(), nullable=False),
        sa.Column("superseded_at", schema.types.UTCDateTime(), nullable=True),
    ]


def upgrade() -> None:
    op.create_table(
        "country_membership",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("country", sa.String(length=2), nullable=False),
        sa.Column("list", sa.String(length=32), nullable=False),
        sa.Column("valid_from", sa.Date(), nullable=True),
        sa.Column("valid_to", sa.Date(), nullable=True),
        sa.Column("source_url", sa.String(length=1000), nullable=False),
        sa.Column("checked", sa.Date(), nullable=False),
        sa.Column("notes", sa.String(length=2000), nullable=True),
        *_versioned(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_country_membership")),
    )
    with op.batch_alter_table("country_membership", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_country_membership_country"), ["country"])
        batch_op.create_index(batch_op.f("ix_country_membership_list"), ["list"])

    op.drop_table("export_rule_set")
    op.create_table(
        "export_rule_set",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slug", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=300), nullable=False),
        sa.Column("effective_from", sa.Date(), nullable=False),
        sa.Column("effective_to", sa.Date(), nullable=True),
        sa.Column("rules", sa.JSON(), nullable=False),
        sa.Column("source_urls", sa.JSON(), nullable=False),
        sa.Column("checked", sa.Date(), nullable=True),
        sa.Column("notes", sa.String(length=2000), nullable=True),
        *_versioned(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_export_rule_set")),
    )
    with op.batch_alter_table("export_rule_set", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_export_rule_set_slug"), ["slug"])

    with op.batch_alter_table("gpu_classification", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_gpu_classification_gpu_slug"))
    op.drop_table("gpu_classification")
    op.create_table(
        "gpu_classification",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("gpu_slug", sa.String(length=64), nullable=False),
        sa.Column("eccn", sa.String(length=32), nullable=False),
        sa.Column("basis", sa.String(length=16), nullable=False),
        sa.Column("effective_from", sa.Date(), nullable=True),
        sa.Column("source_url", sa.String(length=1000), nullable=True),
        sa.Column("checked", sa.Date(), nullable=True),
        sa.Column("notes", sa.String(length=2000), nullable=True),
        *_versioned(),
        sa.ForeignKeyConstraint(
            ["gpu_slug"],
            ["gpu_model.slug"],
            name=op.f("fk_gpu_classification_gpu_slug_gpu_model"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gpu_classification")),
    )
    with op.batch_alter_table("gpu_classification", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_gpu_classification_gpu_slug"), ["gpu_slug"])


def downgrade() -> None:
    with op.batch_alter_table("gpu_classification", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_gpu_classification_gpu_slug"))
    op.drop_table("gpu_classification")
    op.create_table(
        "gpu_classification",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("gpu_slug", sa.String(length=64), nullable=False),
        sa.Column("eccn", sa.String(length=32), nullable=False),
        sa.Column("basis", sa.String(length=16), nullable=False),
        sa.Column("effective_from", sa.Date(), nullable=True),
        sa.Column("source_url", sa.String(length=1000), nullable=True),
        sa.Column("notes", sa.String(length=2000), nullable=True),
        sa.ForeignKeyConstraint(
            ["gpu_slug"],
            ["gpu_model.slug"],
            name=op.f("fk_gpu_classification_gpu_slug_gpu_model"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gpu_classification")),
    )
    with op.batch_alter_table("gpu_classification", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_gpu_classification_gpu_slug"), ["gpu_slug"])

    with op.batch_alter_table("export_rule_set", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_export_rule_set_slug"))
    op.drop_table("export_rule_set")
    op.create_table(
        "export_rule_set",
        sa.Column("slug", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=300), nullable=False),
        sa.Column("effective_from", sa.Date(), nullable=False),
        sa.Column("effective_to", sa.Date(), nullable=True),
        sa.Column("rules", sa.JSON(), nullable=False),
        sa.Column("source_urls", sa.JSON(), nullable=False),
        sa.Column("checked", sa.Date(), nullable=True),
        sa.PrimaryKeyConstraint("slug", name=op.f("pk_export_rule_set")),
    )

    with op.batch_alter_table("country_membership", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_country_membership_list"))
        batch_op.drop_index(batch_op.f("ix_country_membership_country"))
    op.drop_table("country_membership")
