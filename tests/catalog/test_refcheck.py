"""PostgreSQL bulk loads check foreign keys once per load where the role may, and the
result is the same as checking them row by row: the same rows stored, the same refusals,
the same locks on referenced rows, and no trigger of anyone else's silenced."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from psycopg.errors import ForeignKeyViolation
from sqlalchemy import Connection, Engine, Table, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.pool import NullPool

import service.catalog.diff_listener
import service.catalog.ingest
import service.catalog.refcheck
import service.catalog.writer
from service.catalog.diff import Diff
from service.catalog.ingest import ingest
from service.catalog.refcheck import BrokenReference, Load, foreign_keys_checked_per_load
from service.catalog.results import CrawlResult
from service.catalog.snapshot import ingest_jsonl
from service.core.config import Settings
from service.core.db import make_engine
from service.core.migrate import upgrade
from tests.catalog.test_ingest_kill import SIZE as KILL_SIZE
from tests.conftest import scratch_pg_database, truncate_all, with_reference
from tests.support.factories import (
    OBS,
    OFFER,
    catalog_state,
    check_invariants,
    offer_count,
    records,
)
from tests.support.kill_server import KillServer

SIZE = 400


def settings_for(url: str) -> Settings:
    return Settings(database_url=url, environment="test", _env_file=None)  # type: ignore[call-arg]


@pytest.fixture(params=["per-load", "per-row"])
def checks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Large loads (here from 100 new offers on) checked per load, or every load row
    by row (the threshold out of reach)."""
    threshold = 100 if request.param == "per-load" else 10**9
    monkeypatch.setattr(service.catalog.writer, "PER_LOAD_CHECKS_MIN_ROWS", threshold)
    return str(request.param)


@pytest.fixture
def pg_engine(pg_url: str) -> Iterator[Engine]:
    """PostgreSQL only (unlike conftest's ``engine``), one session throughout."""
    engine = make_engine(pg_url, pool_size=1, max_overflow=0)
    yield engine
    engine.dispose()


def told(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "gpuatlas.ingest"]


def replication_roles(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The session's ``session_replication_role`` as the new offers are loaded (read
    just before their ``COPY``: no other statement can run during one)."""
    seen: list[str] = []
    real = service.catalog.writer.Writer._insert_new_rows

    def spying(self: Any, *args: Any) -> None:
        seen.append(self.conn.exec_driver_sql("SHOW session_replication_role").scalar())
        real(self, *args)

    monkeypatch.setattr(service.catalog.writer.Writer, "_insert_new_rows", spying)
    return seen


@pytest.mark.postgres
def test_a_large_load_skips_row_checks_only_while_it_loads(
    pg_engine: Engine, pg_url: str, checks: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = replication_roles(pg_engine, monkeypatch)
    after: list[str] = []
    real = service.catalog.ingest.ensure_instance_types

    def next_step(conn: Any, *args: Any) -> None:  # the ingest's next write, same transaction
        after.append(conn.exec_driver_sql("SHOW session_replication_role").scalar())
        real(conn, *args)

    monkeypatch.setattr(service.catalog.ingest, "ensure_instance_types", next_step)
    result = ingest(pg_engine, settings_for(pg_url), CrawlResult("acme", records(SIZE)))
    assert result.status.value == "ok" and result.added == SIZE
    assert seen == (["replica"] if checks == "per-load" else ["origin"])
    assert after == ["origin"]
    with pg_engine.connect() as conn:  # the same session: the setting did not outlive the load
        assert conn.exec_driver_sql("SHOW session_replication_role").scalar() == "origin"
    check_invariants(pg_engine)


@pytest.mark.postgres
def test_both_ways_store_the_same_catalog(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    states = []
    for threshold in (100, 10**9):
        engine = make_engine(pg_url)
        monkeypatch.setattr(service.catalog.writer, "PER_LOAD_CHECKS_MIN_ROWS", threshold)
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "TRUNCATE price_observation, offer, catalog_version, crawl_run, instance_type, "
                "provider RESTART IDENTITY CASCADE"
            )
        for batch in (records(SIZE), records(SIZE + 150, bump_every=3)):
            assert (
                ingest(engine, settings_for(pg_url), CrawlResult("acme", batch)).status.value
                == "ok"
            )
        with engine.connect() as conn:
            states.append(
                (
                    catalog_state(engine),
                    conn.exec_driver_sql(
                        "SELECT id, offer_id, amount::text, version_from, version_to "
                        "FROM price_observation ORDER BY id"
                    ).all(),
                )
            )
        check_invariants(engine)
        engine.dispose()
    assert states[0] == states[1]


@pytest.mark.postgres
def test_a_broken_reference_is_refused_and_nothing_is_committed(
    pg_engine: Engine, pg_url: str, checks: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ingest whose new offers name a provider that has no row (the registration
    step is knocked out) fails either way, and the catalog is as it was."""
    settings = settings_for(pg_url)
    assert ingest(pg_engine, settings, CrawlResult("acme", records(50))).status.value == "ok"
    before = catalog_state(pg_engine)
    monkeypatch.setattr(service.catalog.ingest, "ensure_providers", lambda *args: None)
    ghost = records(SIZE, provider="ghost-cloud", source="ghost")
    # row by row, PostgreSQL's own refusal, from the COPY (psycopg's, not wrapped)
    expected = BrokenReference if checks == "per-load" else ForeignKeyViolation
    with pytest.raises(expected) as raised:
        ingest(pg_engine, settings, CrawlResult("ghost", ghost))
    if checks == "per-load":
        assert "offer.provider refers to no provider.slug: 'ghost-cloud'" in str(raised.value)
    assert catalog_state(pg_engine) == before
    with pg_engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW session_replication_role").scalar() == "origin"
    monkeypatch.undo()
    assert ingest(pg_engine, settings, CrawlResult("ghost", ghost)).status.value == "ok"
    check_invariants(pg_engine)


@pytest.mark.postgres
def test_line_digests_written_in_the_load_are_checked_with_it(
    pg_url: str, checks: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The line digests of the offers a load adds (service.catalog.lines) are written
    inside it: one that names no offer (the ids knocked off by a million) is refused
    either way, and nothing is committed. (With the reference data: a line whose GPU
    name does not resolve is never recorded.)"""
    path = tmp_path / "acme.jsonl"
    path.write_bytes(b"".join(orjson.dumps(item) + b"\n" for item in records(SIZE)))
    settings = settings_for(pg_url)
    real = Diff.added_lines

    def shifted(diff: Diff, first_id: int) -> list[tuple[int, bytes]]:
        return real(diff, first_id + 10**6)

    engine = make_engine(with_reference(pg_url))
    try:
        monkeypatch.setattr(Diff, "added_lines", shifted)
        expected = BrokenReference if checks == "per-load" else ForeignKeyViolation
        with pytest.raises(expected) as raised:
            ingest_jsonl(engine, settings, path, "acme")
        if checks == "per-load":
            assert "offer_line.offer_id refers to no offer.id" in str(raised.value)
        assert offer_count(engine) == 0
        monkeypatch.setattr(Diff, "added_lines", real)
        result = ingest_jsonl(engine, settings, path, "acme")
        assert (result.status.value, result.added) == ("ok", SIZE)
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM offer_line").scalar() == SIZE
        check_invariants(engine)
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_the_referenced_rows_are_locked_until_the_ingest_commits(
    pg_engine: Engine, pg_url: str, checks: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the ingest commits, another session cannot delete the provider its new
    offers refer to (it waits on the lock the checks took, here for 200 ms at most)."""
    settings = settings_for(pg_url)
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO provider (slug, name, kind, status) "
            "VALUES ('acme', 'Acme', 'unknown', 'active')"
        )
    other = make_engine(pg_url, poolclass=NullPool)
    outcome: list[str] = []
    real = service.catalog.diff_listener.listener

    def meanwhile(*args: Any) -> int:
        with other.connect() as conn:
            conn.exec_driver_sql("SET lock_timeout = '200ms'")
            try:
                conn.exec_driver_sql("DELETE FROM provider WHERE slug = 'acme'")
            except OperationalError as exc:
                outcome.append(type(exc.orig).__name__)
            else:
                outcome.append("deleted")
            conn.rollback()
        return real(*args)

    monkeypatch.setattr(service.catalog.diff_listener, "listener", meanwhile)
    try:
        assert ingest(pg_engine, settings, CrawlResult("acme", records(SIZE))).status.value == "ok"
    finally:
        other.dispose()
    assert outcome == ["LockNotAvailable"]
    check_invariants(pg_engine)


@pytest.mark.postgres
def test_a_table_with_a_trigger_of_its_own_keeps_row_checks_and_its_trigger(
    pg_engine: Engine,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``replica`` would silence every ordinary trigger, not only the foreign keys': a
    loaded table with one of its own (an operator's audit, say) is loaded as before."""
    monkeypatch.setattr(service.catalog.writer, "PER_LOAD_CHECKS_MIN_ROWS", 100)
    monkeypatch.setattr(service.catalog.refcheck, "_told", set())
    caplog.set_level("INFO", logger="gpuatlas.ingest")
    seen = replication_roles(pg_engine, monkeypatch)
    with pg_engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE audit_count (n integer NOT NULL)")
        conn.exec_driver_sql(
            "CREATE FUNCTION audit_offer() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN INSERT INTO audit_count VALUES (1); RETURN NEW; END $$"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER audit_offer AFTER INSERT ON offer "
            "FOR EACH ROW EXECUTE FUNCTION audit_offer()"
        )
    try:
        result = ingest(pg_engine, settings_for(pg_url), CrawlResult("acme", records(SIZE)))
        assert result.status.value == "ok"
        assert seen == ["origin"]
        with pg_engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM audit_count").scalar() == SIZE
        assert told(caplog) == [
            "large loads keep PostgreSQL's per-row foreign-key checks: offer has triggers "
            "or rules of its own, which replica would silence"
        ]
    finally:
        with pg_engine.begin() as conn:
            conn.exec_driver_sql("DROP TRIGGER audit_offer ON offer")
            conn.exec_driver_sql("DROP FUNCTION audit_offer()")
            conn.exec_driver_sql("DROP TABLE audit_count")


@pytest.fixture
def plain_role_url(pg_url: str) -> Iterator[str]:
    """The test database reached as a new role that is neither a superuser nor allowed
    to set ``session_replication_role``, with the privileges an ingest needs."""
    role = f"gpuatlas_plain_{uuid.uuid4().hex[:8]}"
    admin = make_engine(pg_url, poolclass=NullPool)
    database = make_url(pg_url).database
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN NOSUPERUSER")
        conn.exec_driver_sql(f'GRANT CONNECT, TEMPORARY ON DATABASE "{database}" TO {role}')
        conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA public TO {role}")
        conn.exec_driver_sql(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
        conn.exec_driver_sql(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}")
    try:
        yield (
            make_url(pg_url).set(username=role, password=None).render_as_string(hide_password=False)
        )
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %(r)s",
                {"r": role},
            )
            conn.exec_driver_sql(f"DROP OWNED BY {role}")
            conn.exec_driver_sql(f"DROP ROLE {role}")
        admin.dispose()


@pytest.mark.postgres
def test_a_role_without_the_privilege_checks_row_by_row(
    plain_role_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """It says so once in the log, with the grant that would allow the faster way."""
    monkeypatch.setattr(service.catalog.writer, "PER_LOAD_CHECKS_MIN_ROWS", 100)
    monkeypatch.setattr(service.catalog.refcheck, "_told", set())
    caplog.set_level("INFO", logger="gpuatlas.ingest")
    engine = make_engine(plain_role_url, pool_size=1, max_overflow=0)
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda _c, _cur, sql, *_: statements.append(sql))
    try:
        seen = replication_roles(engine, monkeypatch)
        result = ingest(engine, settings_for(plain_role_url), CrawlResult("acme", records(SIZE)))
        assert result.status.value == "ok" and result.added == SIZE
        assert seen == ["origin"]
        assert not any("set_config('session_replication_role'" in s for s in statements)
        again = ingest(
            engine,
            settings_for(plain_role_url),
            CrawlResult("other", records(SIZE, source="other")),
        )
        assert again.status.value == "ok"
        assert told(caplog) == [  # once, not at every large load
            "large loads keep PostgreSQL's per-row foreign-key checks: this role may not set "
            "session_replication_role (GRANT SET ON PARAMETER session_replication_role TO "
            "<role> would allow it)"
        ]
        with engine.begin() as conn:  # and the helper says why, without trying
            reason = service.catalog.refcheck.row_checks_needed(conn, [OFFER, OBS])
            assert reason is not None and reason.startswith("this role may not set")
            for version in (140011, 150019):  # asked either way, the answer is no
                query = service.catalog.refcheck.privilege_query(version)
                assert conn.exec_driver_sql(query).scalar() is False
            with foreign_keys_checked_per_load(conn, [Load(OFFER, 1)]):
                role = conn.exec_driver_sql("SHOW session_replication_role").scalar()
            assert role == "origin"
        check_invariants(engine)
    finally:
        engine.dispose()


def test_on_sqlite_nothing_changes(sqlite_url: str) -> None:
    """SQLite checks its foreign keys itself, cheaply: the scope runs no statement."""
    engine = make_engine(sqlite_url)
    statements: list[str] = []
    try:
        with engine.begin() as conn:
            event.listen(
                engine, "before_cursor_execute", lambda _c, _cur, sql, *_: statements.append(sql)
            )
            with foreign_keys_checked_per_load(conn, [Load(OFFER, 1), Load(OBS, 1)]):
                pass
        assert statements == []
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_missing_table_is_named(pg_url: str) -> None:
    from sqlalchemy import Column, Integer, MetaData, Table

    ghost = Table("no_such_table", MetaData(), Column("id", Integer, primary_key=True))
    engine = make_engine(pg_url)
    try:
        with engine.begin() as conn, pytest.raises(LookupError, match="no_such_table"):
            service.catalog.refcheck.row_checks_needed(conn, [ghost])
    finally:
        engine.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize("version", [140011, 150019, 170002])
def test_the_privilege_question_fits_the_server_version(pg_url: str, version: int) -> None:
    """Before PostgreSQL 15 there is no ``has_parameter_privilege`` to ask (a query naming
    it fails there, whatever branch it takes); only a superuser may set the parameter.
    Both forms run here and agree for this (superuser) test role."""
    query = service.catalog.refcheck.privilege_query(version)
    assert ("has_parameter_privilege" in query) == (version >= 150000)
    engine = make_engine(pg_url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql(query).scalar() is True
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_composite_foreign_key_is_checked_as_one(pg_url: str) -> None:
    """Each column of a two-column reference may exist on its own while the pair does
    not: that is a broken reference, as PostgreSQL's own check says. A row with a null
    in the pair is not checked (MATCH SIMPLE, the default), as PostgreSQL does not."""
    from sqlalchemy import Column, ForeignKeyConstraint, Integer, MetaData

    meta = MetaData()
    parent = Table(
        "refcheck_parent",
        meta,
        Column("a", Integer, primary_key=True),
        Column("b", Integer, primary_key=True),
    )
    child = Table(
        "refcheck_child",
        meta,
        Column("id", Integer, primary_key=True),
        Column("a", Integer),
        Column("b", Integer),
        ForeignKeyConstraint(["a", "b"], ["refcheck_parent.a", "refcheck_parent.b"]),
    )
    engine = make_engine(pg_url)
    meta.create_all(engine)
    try:
        with engine.begin() as conn:
            conn.execute(parent.insert(), [{"a": 1, "b": 1}, {"a": 2, "b": 2}])
        whole = [{"id": 1, "a": 1, "b": 1}, {"id": 2, "a": 2, "b": None}]
        split = [{"id": 3, "a": 1, "b": 2}]  # 1 and 2 exist, the pair (1, 2) does not
        for per_load in (False, True):
            with engine.connect() as conn:  # accepted, then rolled back
                trans = conn.begin()
                with checked(conn, per_load, child, 1):
                    conn.execute(child.insert(), whole)
                trans.rollback()
            with engine.connect() as conn:
                refusal = BrokenReference if per_load else IntegrityError
                with (
                    pytest.raises(refusal) as raised,
                    conn.begin(),
                    checked(conn, per_load, child, 3),
                ):
                    conn.execute(child.insert(), split)
            if per_load:
                assert "refcheck_child.(a, b) refers to no refcheck_parent.a, b: (1, 2)" in str(
                    raised.value
                )
    finally:
        meta.drop_all(engine)
        engine.dispose()


KILLED_APP = "gpuatlas-kill-child"
"""The application_name of the ingest children that the SIGKILL test kills."""


@contextlib.contextmanager
def checked(conn: Connection, per_load: bool, table: Table, first: int) -> Iterator[None]:
    if per_load:
        with foreign_keys_checked_per_load(conn, [Load(table, first)]):
            yield
    else:
        yield


def wait_quiet(engine: Engine, seconds: float = 60) -> None:
    """Until no session of the killed ingest children (``KILLED_APP``) is left: a killed
    client's backend ends its transaction (rolled back, or committed if its COMMIT had been
    sent) before it goes away. Other sessions of this database (other tests' pooled
    connections, which may sit idle in a transaction) are not the children's and are not
    waited for."""
    deadline = time.monotonic() + seconds
    with engine.connect() as conn:
        while time.monotonic() < deadline:
            others = conn.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND application_name = %(app)s "
                "AND state IS DISTINCT FROM 'idle'",
                {"app": KILLED_APP},
            ).scalar()
            # pg_stat_activity is read once per transaction (stats_fetch_consistency):
            # polled in one transaction, a backend seen busy once stayed busy until the
            # deadline, and the test took 60 s more per such kill (300 s: a timeout in CI)
            conn.rollback()
            if not others:
                return
            time.sleep(0.01)
        # a backend waiting on the dead client may not notice for a long time (no TCP
        # keepalive here); end it as the server would, then check the catalog as before
        conn.exec_driver_sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = %(app)s",
            {"app": KILLED_APP},
        )


@pytest.fixture
def own_pg_url() -> Iterator[str]:
    """A database of the test's own: in the shared one, another test's leftover session (a
    dispatcher thread's open transaction) can hold a lock that a killed ingest's backend
    waits on, so it never sees its client gone."""
    with scratch_pg_database() as url:
        upgrade(url)
        yield url


@pytest.mark.slow
@pytest.mark.postgres
def test_sigkill_during_a_load_checked_per_load_leaves_none_or_all_of_it(own_pg_url: str) -> None:
    """SIGKILL at random points of a first ingest that skips the per-row checks: each
    time the catalog holds none or all of the offers, every reference holds, and new
    sessions check row by row as always; then an ingest works."""
    rng = random.Random(20261130)
    engine = make_engine(own_pg_url, poolclass=NullPool)
    joiner = "&" if "?" in own_pg_url else "?"
    server = KillServer(
        f"{own_pg_url}{joiner}application_name={KILLED_APP}", per_load_checks_min_rows=100
    )
    outcomes = {"before": 0, "after": 0}
    try:
        durations = []
        for _ in range(2):
            started = time.monotonic()
            server.wait_dead(server.spawn("a"))
            durations.append(time.monotonic() - started)
            assert offer_count(engine) == KILL_SIZE  # a whole ingest, checked per load
            truncate_all(own_pg_url)
        window = 1.25 * durations[-1]
        for kill in range(30):
            if kill >= 12 and outcomes["before"] and outcomes["after"]:
                break
            if kill >= 12:
                window = window * 1.5 if outcomes["before"] else window / 1.5
            pid = server.spawn("a")
            time.sleep(rng.uniform(0.0, window))
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            server.wait_dead(pid)
            wait_quiet(engine)
            count = offer_count(engine)
            assert count in (0, KILL_SIZE), f"half an ingest is visible: {count}"
            outcomes["after" if count else "before"] += 1
            with engine.connect() as conn:
                assert conn.exec_driver_sql("SHOW session_replication_role").scalar() == "origin"
                orphans = conn.exec_driver_sql(
                    "SELECT (SELECT count(*) FROM price_observation AS o WHERE NOT EXISTS "
                    "(SELECT 1 FROM offer AS f WHERE f.id = o.offer_id)) + (SELECT count(*) "
                    "FROM offer AS f WHERE NOT EXISTS (SELECT 1 FROM provider AS p "
                    "WHERE p.slug = f.provider))"
                ).scalar()
                assert orphans == 0
            check_invariants(engine)
            truncate_all(own_pg_url)
    finally:
        server.close()
        engine.dispose()
    print(f"kill outcomes: {outcomes}")
    if not (outcomes["before"] and outcomes["after"]):
        pytest.fail(f"kills did not land on both sides of the commit: {outcomes}")
    engine = make_engine(own_pg_url)
    try:
        result = ingest(engine, settings_for(own_pg_url), CrawlResult("acme", records(KILL_SIZE)))
        assert result.status.value == "ok" and offer_count(engine) == KILL_SIZE
        check_invariants(engine)
    finally:
        engine.dispose()
