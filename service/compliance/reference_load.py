"""Load the reviewed reference data (``fixtures/reference/``) into the catalog, in one
transaction.

The catalog's part (providers, regions, GPU models and aliases:
:mod:`service.catalog.reference`; transfer and storage costs:
:mod:`service.catalog.costs`; cluster facts of instance families:
:mod:`service.catalog.cluster`) is written first, then the compliance part on top of it
(:mod:`service.compliance.load`), then every provider's locations are refreshed. A bad
file or row of either part (:class:`ReferenceError`) writes nothing; a second load of the
same files changes nothing.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from service.catalog.cluster import check_cluster, refresh_cluster_facts, write_cluster
from service.catalog.costs import check_costs, write_costs
from service.catalog.locations import refresh as refresh_locations
from service.catalog.reference import LoadReport, check_reference, lock_catalog, write_reference
from service.compliance.load import load_compliance
from service.core.db import writer


def load_reference(engine: Engine, directory: Path) -> LoadReport:
    checked = check_reference(directory)
    costs = check_costs(directory, checked)
    cluster = check_cluster(directory, checked)
    report = checked.report()
    with writer(engine).begin() as conn:
        lock_catalog(conn)
        report.changed.update(write_reference(conn, checked))
        report.changed["costs"] = write_costs(conn, costs)
        report.changed["cluster_reference"] = write_cluster(conn, cluster)
        # stored offers take the new reference facts now, not at their next crawl
        report.changed["offer_cluster_facts"] = refresh_cluster_facts(conn)
        report.changed.update(load_compliance(conn, directory))
        # a reference change takes effect without a crawl: every provider's locations
        report.changed["offer_locations"] = refresh_locations(conn).written
    return report
