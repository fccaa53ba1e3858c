"""catalog schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29 22:19:14.201253
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import schema.types

revision: str = '0001'
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('api_key',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('prefix', sa.String(length=16), nullable=False),
    sa.Column('key_hash', sa.String(length=128), nullable=False),
    sa.Column('created_at', schema.types.UTCDateTime(), nullable=False),
    sa.Column('revoked_at', schema.types.UTCDateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_key')),
    sa.UniqueConstraint('key_hash', name=op.f('uq_api_key_key_hash'))
    )
    with op.batch_alter_table('api_key', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_key_prefix'), ['prefix'], unique=False)

    op.create_table('crawl_run',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('source', sa.String(length=100), nullable=False),
    sa.Column('trigger', sa.String(length=32), nullable=False),
    sa.Column('started_at', schema.types.UTCDateTime(), nullable=False),
    sa.Column('finished_at', schema.types.UTCDateTime(), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('reason', sa.String(length=200), nullable=True),
    sa.Column('error', sa.String(length=4000), nullable=True),
    sa.Column('parser_version', sa.String(length=32), nullable=True),
    sa.Column('source_urls', sa.JSON(), nullable=False),
    sa.Column('seen', sa.Integer(), nullable=False),
    sa.Column('added', sa.Integer(), nullable=False),
    sa.Column('changed', sa.Integer(), nullable=False),
    sa.Column('withdrawn', sa.Integer(), nullable=False),
    sa.Column('updated', sa.Integer(), nullable=False),
    sa.Column('rejected', sa.Integer(), nullable=False),
    sa.Column('unmapped', sa.Integer(), nullable=False),
    sa.Column('catalog_version', sa.Integer(), nullable=True),
    sa.Column('log', sa.String(length=100000), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_crawl_run'))
    )
    with op.batch_alter_table('crawl_run', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_crawl_run_source'), ['source'], unique=False)
        batch_op.create_index(batch_op.f('ix_crawl_run_status'), ['status'], unique=False)

    op.create_table('export_rule_set',
    sa.Column('slug', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=300), nullable=False),
    sa.Column('effective_from', sa.Date(), nullable=False),
    sa.Column('effective_to', sa.Date(), nullable=True),
    sa.Column('rules', sa.JSON(), nullable=False),
    sa.Column('source_urls', sa.JSON(), nullable=False),
    sa.Column('checked', sa.Date(), nullable=True),
    sa.PrimaryKeyConstraint('slug', name=op.f('pk_export_rule_set'))
    )
    op.create_table('fx_rate',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('rate_date', sa.Date(), nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('per_eur', schema.types.DecimalType(), nullable=False),
    sa.Column('source', sa.String(length=64), nullable=False),
    sa.Column('crawl_run_id', sa.Integer(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_fx_rate')),
    sa.UniqueConstraint('rate_date', 'currency', name=op.f('uq_fx_rate_rate_date_currency'))
    )
    with op.batch_alter_table('fx_rate', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_fx_rate_rate_date'), ['rate_date'], unique=False)

    op.create_table('gpu_model',
    sa.Column('slug', sa.String(length=64), nullable=False),
    sa.Column('vendor', sa.String(length=32), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('family', sa.String(length=32), nullable=False),
    sa.Column('memory_gb', schema.types.DecimalType(), nullable=True),
    sa.Column('memory_type', sa.String(length=32), nullable=True),
    sa.Column('memory_bandwidth_tbps', schema.types.DecimalType(), nullable=True),
    sa.Column('tflops_fp64', schema.types.DecimalType(), nullable=True),
    sa.Column('tflops_tf32', schema.types.DecimalType(), nullable=True),
    sa.Column('tflops_bf16', schema.types.DecimalType(), nullable=True),
    sa.Column('tflops_fp16', schema.types.DecimalType(), nullable=True),
    sa.Column('tflops_fp8', schema.types.DecimalType(), nullable=True),
    sa.Column('tops_int8', schema.types.DecimalType(), nullable=True),
    sa.Column('tflops_fp4', schema.types.DecimalType(), nullable=True),
    sa.Column('die_area_mm2', schema.types.DecimalType(), nullable=True),
    sa.Column('interconnect', sa.String(length=200), nullable=True),
    sa.Column('form_factor', sa.String(length=32), nullable=True),
    sa.Column('data_center', sa.Boolean(), nullable=False),
    sa.Column('tdp_w', sa.Integer(), nullable=True),
    sa.Column('launch_year', sa.Integer(), nullable=True),
    sa.Column('source_url', sa.String(length=1000), nullable=True),
    sa.Column('checked', sa.Date(), nullable=True),
    sa.Column('notes', sa.String(length=2000), nullable=True),
    sa.PrimaryKeyConstraint('slug', name=op.f('pk_gpu_model'))
    )
    with op.batch_alter_table('gpu_model', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_gpu_model_family'), ['family'], unique=False)

    op.create_table('provider',
    sa.Column('slug', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('hq_country', sa.String(length=2), nullable=True),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('website', sa.String(length=500), nullable=True),
    sa.Column('pricing_url', sa.String(length=500), nullable=True),
    sa.Column('source_url', sa.String(length=500), nullable=True),
    sa.Column('checked', sa.Date(), nullable=True),
    sa.Column('notes', sa.String(length=2000), nullable=True),
    sa.PrimaryKeyConstraint('slug', name=op.f('pk_provider'))
    )
    op.create_table('raw_payload',
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('size', sa.Integer(), nullable=False),
    sa.Column('compressed', sa.LargeBinary(), nullable=False),
    sa.Column('content_type', sa.String(length=200), nullable=True),
    sa.Column('first_seen_at', schema.types.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('sha256', name=op.f('pk_raw_payload'))
    )
    op.create_table('unmapped_name',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('source', sa.String(length=100), nullable=False),
    sa.Column('value', sa.String(length=200), nullable=False),
    sa.Column('occurrences', sa.Integer(), nullable=False),
    sa.Column('first_seen_at', schema.types.UTCDateTime(), nullable=False),
    sa.Column('last_seen_at', schema.types.UTCDateTime(), nullable=False),
    sa.Column('last_crawl_run_id', sa.Integer(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_unmapped_name')),
    sa.UniqueConstraint('kind', 'source', 'value', name=op.f('uq_unmapped_name_kind_source_value'))
    )
    op.create_table('catalog_version',
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('created_at', schema.types.UTCDateTime(), nullable=False),
    sa.Column('source', sa.String(length=100), nullable=False),
    sa.Column('crawl_run_id', sa.Integer(), nullable=False),
    sa.Column('added', sa.Integer(), nullable=False),
    sa.Column('changed', sa.Integer(), nullable=False),
    sa.Column('withdrawn', sa.Integer(), nullable=False),
    sa.Column('updated', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['crawl_run_id'], ['crawl_run.id'], name=op.f('fk_catalog_version_crawl_run_id_crawl_run')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_catalog_version'))
    )
    with op.batch_alter_table('catalog_version', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_catalog_version_crawl_run_id'), ['crawl_run_id'], unique=False)

    op.create_table('certification',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('provider', sa.String(length=64), nullable=False),
    sa.Column('scheme', sa.String(length=32), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('regions', sa.JSON(), nullable=True),
    sa.Column('valid_from', sa.Date(), nullable=True),
    sa.Column('valid_to', sa.Date(), nullable=True),
    sa.Column('evidence_url', sa.String(length=1000), nullable=True),
    sa.Column('checked', sa.Date(), nullable=True),
    sa.Column('recorded_at', schema.types.UTCDateTime(), nullable=False),
    sa.Column('superseded_at', schema.types.UTCDateTime(), nullable=True),
    sa.Column('notes', sa.String(length=2000), nullable=True),
    sa.ForeignKeyConstraint(['provider'], ['provider.slug'], name=op.f('fk_certification_provider_provider')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_certification'))
    )
    with op.batch_alter_table('certification', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_certification_provider'), ['provider'], unique=False)
        batch_op.create_index(batch_op.f('ix_certification_scheme'), ['scheme'], unique=False)

    op.create_table('crawl_run_payload',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('crawl_run_id', sa.Integer(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('url', sa.String(length=2048), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('fetched_at', schema.types.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['crawl_run_id'], ['crawl_run.id'], name=op.f('fk_crawl_run_payload_crawl_run_id_crawl_run')),
    sa.ForeignKeyConstraint(['sha256'], ['raw_payload.sha256'], name=op.f('fk_crawl_run_payload_sha256_raw_payload')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_crawl_run_payload'))
    )
    with op.batch_alter_table('crawl_run_payload', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_crawl_run_payload_crawl_run_id'), ['crawl_run_id'], unique=False)

    op.create_table('gpu_alias',
    sa.Column('alias', sa.String(length=200), nullable=False),
    sa.Column('gpu_slug', sa.String(length=64), nullable=False),
    sa.Column('spelling', sa.String(length=200), nullable=False),
    sa.ForeignKeyConstraint(['gpu_slug'], ['gpu_model.slug'], name=op.f('fk_gpu_alias_gpu_slug_gpu_model')),
    sa.PrimaryKeyConstraint('alias', name=op.f('pk_gpu_alias'))
    )
    with op.batch_alter_table('gpu_alias', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_gpu_alias_gpu_slug'), ['gpu_slug'], unique=False)

    op.create_table('gpu_classification',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('gpu_slug', sa.String(length=64), nullable=False),
    sa.Column('eccn', sa.String(length=32), nullable=False),
    sa.Column('basis', sa.String(length=16), nullable=False),
    sa.Column('effective_from', sa.Date(), nullable=True),
    sa.Column('source_url', sa.String(length=1000), nullable=True),
    sa.Column('notes', sa.String(length=2000), nullable=True),
    sa.ForeignKeyConstraint(['gpu_slug'], ['gpu_model.slug'], name=op.f('fk_gpu_classification_gpu_slug_gpu_model')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_gpu_classification'))
    )
    with op.batch_alter_table('gpu_classification', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_gpu_classification_gpu_slug'), ['gpu_slug'], unique=False)

    op.create_table('instance_type',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('provider', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('gpu_slug', sa.String(length=64), nullable=True),
    sa.Column('gpu_count', schema.types.DecimalType(), nullable=False),
    sa.Column('vcpus', schema.types.DecimalType(), nullable=True),
    sa.Column('memory_gb', schema.types.DecimalType(), nullable=True),
    sa.Column('bare_metal', sa.Boolean(), nullable=True),
    sa.ForeignKeyConstraint(['provider'], ['provider.slug'], name=op.f('fk_instance_type_provider_provider')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_type')),
    sa.UniqueConstraint('provider', 'name', name=op.f('uq_instance_type_provider_name'))
    )
    op.create_table('offer',
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('source', sa.String(length=100), nullable=False),
    sa.Column('provider', sa.String(length=64), nullable=False),
    sa.Column('sku', sa.String(length=200), nullable=False),
    sa.Column('region', sa.String(length=100), nullable=False),
    sa.Column('price_kind', sa.String(length=32), nullable=False),
    sa.Column('unit', sa.String(length=16), nullable=False),
    sa.Column('price_per', sa.String(length=16), nullable=False),
    sa.Column('gpu_slug', sa.String(length=64), nullable=True),
    sa.Column('gpu_name_raw', sa.String(length=200), nullable=True),
    sa.Column('gpu_count', schema.types.DecimalType(), nullable=False),
    sa.Column('gpu_memory_gb', schema.types.DecimalType(), nullable=True),
    sa.Column('vcpus', schema.types.DecimalType(), nullable=True),
    sa.Column('memory_gb', schema.types.DecimalType(), nullable=True),
    sa.Column('country', sa.String(length=2), nullable=True),
    sa.Column('bare_metal', sa.Boolean(), nullable=True),
    sa.Column('price_floor', sa.Boolean(), nullable=False),
    sa.Column('source_url', sa.String(length=2048), nullable=True),
    sa.Column('fingerprint', sa.String(length=16), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('amount', schema.types.DecimalType(), nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('observation_id', sa.Integer(), nullable=False),
    sa.Column('first_seen_at', schema.types.UTCDateTime(), nullable=False),
    sa.Column('first_seen_version', sa.Integer(), nullable=False),
    sa.Column('last_changed_at', schema.types.UTCDateTime(), nullable=False),
    sa.Column('last_changed_version', sa.Integer(), nullable=False),
    sa.Column('withdrawn_at', schema.types.UTCDateTime(), nullable=True),
    sa.Column('withdrawn_version', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['provider'], ['provider.slug'], name=op.f('fk_offer_provider_provider')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_offer')),
    sa.UniqueConstraint('source', 'provider', 'sku', 'region', 'price_kind', 'unit', name=op.f('uq_offer_source_provider_sku_region_price_kind_unit'))
    )
    with op.batch_alter_table('offer', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_offer_country'), ['country'], unique=False)
        batch_op.create_index('ix_offer_gpu_slug_status', ['gpu_slug', 'status'], unique=False)
        batch_op.create_index(batch_op.f('ix_offer_provider'), ['provider'], unique=False)

    op.create_table('region',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('provider', sa.String(length=64), nullable=False),
    sa.Column('code', sa.String(length=100), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=True),
    sa.Column('country', sa.String(length=2), nullable=False),
    sa.Column('city', sa.String(length=200), nullable=True),
    sa.Column('source_url', sa.String(length=500), nullable=True),
    sa.Column('checked', sa.Date(), nullable=True),
    sa.ForeignKeyConstraint(['provider'], ['provider.slug'], name=op.f('fk_region_provider_provider')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_region')),
    sa.UniqueConstraint('provider', 'code', name=op.f('uq_region_provider_code'))
    )
    with op.batch_alter_table('region', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_region_country'), ['country'], unique=False)
        batch_op.create_index(batch_op.f('ix_region_provider'), ['provider'], unique=False)

    op.create_table('rejected_record',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('crawl_run_id', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('reason', sa.String(length=1000), nullable=False),
    sa.Column('record', sa.JSON(), nullable=True),
    sa.ForeignKeyConstraint(['crawl_run_id'], ['crawl_run.id'], name=op.f('fk_rejected_record_crawl_run_id_crawl_run')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_rejected_record'))
    )
    with op.batch_alter_table('rejected_record', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_rejected_record_crawl_run_id'), ['crawl_run_id'], unique=False)

    op.create_table('subscription',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('api_key_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=True),
    sa.Column('filters', sa.JSON(), nullable=False),
    sa.Column('condition', sa.JSON(), nullable=False),
    sa.Column('channel', sa.String(length=16), nullable=False),
    sa.Column('url', sa.String(length=2048), nullable=True),
    sa.Column('secret', sa.String(length=128), nullable=True),
    sa.Column('created_at', schema.types.UTCDateTime(), nullable=False),
    sa.Column('deleted_at', schema.types.UTCDateTime(), nullable=True),
    sa.ForeignKeyConstraint(['api_key_id'], ['api_key.id'], name=op.f('fk_subscription_api_key_id_api_key')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_subscription'))
    )
    with op.batch_alter_table('subscription', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_subscription_api_key_id'), ['api_key_id'], unique=False)

    op.create_table('alert_event',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('subscription_id', sa.Integer(), nullable=False),
    sa.Column('catalog_version', sa.Integer(), nullable=False),
    sa.Column('event_type', sa.String(length=32), nullable=False),
    sa.Column('offer_id', sa.Integer(), nullable=True),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('idempotency_key', sa.String(length=100), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', schema.types.UTCDateTime(), nullable=True),
    sa.Column('last_error', sa.String(length=2000), nullable=True),
    sa.Column('created_at', schema.types.UTCDateTime(), nullable=False),
    sa.Column('delivered_at', schema.types.UTCDateTime(), nullable=True),
    sa.ForeignKeyConstraint(['subscription_id'], ['subscription.id'], name=op.f('fk_alert_event_subscription_id_subscription')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_alert_event')),
    sa.UniqueConstraint('idempotency_key', name=op.f('uq_alert_event_idempotency_key'))
    )
    with op.batch_alter_table('alert_event', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_alert_event_catalog_version'), ['catalog_version'], unique=False)
        batch_op.create_index(batch_op.f('ix_alert_event_status'), ['status'], unique=False)
        batch_op.create_index(batch_op.f('ix_alert_event_subscription_id'), ['subscription_id'], unique=False)

    op.create_table('price_observation',
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('offer_id', sa.Integer(), nullable=False),
    sa.Column('amount', schema.types.DecimalType(), nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('hourly_amount', schema.types.DecimalType(), nullable=True),
    sa.Column('amount_usd', schema.types.DecimalType(), nullable=True),
    sa.Column('hourly_usd', schema.types.DecimalType(), nullable=True),
    sa.Column('gpu_hour_usd', schema.types.DecimalType(), nullable=True),
    sa.Column('fx_rate', schema.types.DecimalType(), nullable=True),
    sa.Column('fx_date', sa.Date(), nullable=True),
    sa.Column('fx_source', sa.String(length=64), nullable=True),
    sa.Column('valid_from', schema.types.UTCDateTime(), nullable=False),
    sa.Column('valid_to', schema.types.UTCDateTime(), nullable=True),
    sa.Column('version_from', sa.Integer(), nullable=False),
    sa.Column('version_to', sa.Integer(), nullable=True),
    sa.Column('crawl_run_id', sa.Integer(), nullable=False),
    sa.Column('raw_sha256', sa.String(length=64), nullable=True),
    sa.ForeignKeyConstraint(['crawl_run_id'], ['crawl_run.id'], name=op.f('fk_price_observation_crawl_run_id_crawl_run')),
    sa.ForeignKeyConstraint(['offer_id'], ['offer.id'], name=op.f('fk_price_observation_offer_id_offer')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_price_observation'))
    )
    with op.batch_alter_table('price_observation', schema=None) as batch_op:
        batch_op.create_index('ix_price_observation_offer_valid', ['offer_id', 'valid_from'], unique=False)
        batch_op.create_index(batch_op.f('ix_price_observation_version_from'), ['version_from'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('price_observation', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_price_observation_version_from'))
        batch_op.drop_index('ix_price_observation_offer_valid')

    op.drop_table('price_observation')
    with op.batch_alter_table('alert_event', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alert_event_subscription_id'))
        batch_op.drop_index(batch_op.f('ix_alert_event_status'))
        batch_op.drop_index(batch_op.f('ix_alert_event_catalog_version'))

    op.drop_table('alert_event')
    with op.batch_alter_table('subscription', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_subscription_api_key_id'))

    op.drop_table('subscription')
    with op.batch_alter_table('rejected_record', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_rejected_record_crawl_run_id'))

    op.drop_table('rejected_record')
    with op.batch_alter_table('region', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_region_provider'))
        batch_op.drop_index(batch_op.f('ix_region_country'))

    op.drop_table('region')
    with op.batch_alter_table('offer', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_offer_provider'))
        batch_op.drop_index('ix_offer_gpu_slug_status')
        batch_op.drop_index(batch_op.f('ix_offer_country'))

    op.drop_table('offer')
    op.drop_table('instance_type')
    with op.batch_alter_table('gpu_classification', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_gpu_classification_gpu_slug'))

    op.drop_table('gpu_classification')
    with op.batch_alter_table('gpu_alias', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_gpu_alias_gpu_slug'))

    op.drop_table('gpu_alias')
    with op.batch_alter_table('crawl_run_payload', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_crawl_run_payload_crawl_run_id'))

    op.drop_table('crawl_run_payload')
    with op.batch_alter_table('certification', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_certification_scheme'))
        batch_op.drop_index(batch_op.f('ix_certification_provider'))

    op.drop_table('certification')
    with op.batch_alter_table('catalog_version', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_catalog_version_crawl_run_id'))

    op.drop_table('catalog_version')
    op.drop_table('unmapped_name')
    op.drop_table('raw_payload')
    op.drop_table('provider')
    with op.batch_alter_table('gpu_model', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_gpu_model_family'))

    op.drop_table('gpu_model')
    with op.batch_alter_table('fx_rate', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_fx_rate_rate_date'))

    op.drop_table('fx_rate')
    op.drop_table('export_rule_set')
    with op.batch_alter_table('crawl_run', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_crawl_run_status'))
        batch_op.drop_index(batch_op.f('ix_crawl_run_source'))

    op.drop_table('crawl_run')
    with op.batch_alter_table('api_key', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_key_prefix'))

    op.drop_table('api_key')
