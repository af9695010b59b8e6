"""The controller's storage migration (controller/storage_migration.py): run once the cluster's Lease is taken (at
the start without leader election), tried again while it fails, ended by a lost Lease; a finished one is not run
again. The migration itself: tests/unit/test_storage_migration.py, and on a real apiserver
tests/e2e/test_storage_migration.py."""
from __future__ import annotations

import threading
import types

from controller import storage_migration
from controller.library import api_storage_migration


def engine():
    return types.SimpleNamespace(stop=threading.Event())


def cluster(name="a", leader=True):
    return types.SimpleNamespace(name=name, api=object(), leader=object() if leader else None)


def fake_migrate(answers, calls):
    """migrate() answering from `answers` in turn (an exception is raised), counting its calls by cluster."""
    def migrate(api, group, names):
        calls.append((group, tuple(names)))
        answer = answers.pop(0) if answers else []
        if isinstance(answer, Exception):
            raise answer
        return answer
    return migrate


def wait(feature, cs):
    feature._threads[cs.name].join(10)  # pylint: disable=protected-access
    assert not feature._threads[cs.name].is_alive()  # pylint: disable=protected-access


def test_runs_when_the_lease_is_taken_and_retries_until_it_succeeds(monkeypatch):
    calls = []
    report = [{"name": "configurations.networking.liqo.io", "changed": True, "objects": 2,
               "stored_versions_before": ["v1alpha1", "v1beta1"], "stored_versions": ["v1beta1"]}]
    monkeypatch.setattr(storage_migration.migration, "migrate", fake_migrate(
        [api_storage_migration.MigrationError("webhook down"), report], calls))
    feature = storage_migration.StorageMigration(engine(), retry=0.01)
    cs = cluster()
    feature.start(cs)
    assert calls == [] and cs.name not in feature.done   # with leader election: nothing before the Lease
    feature.leading(cs, True)
    wait(feature, cs)
    assert len(calls) == 2 and feature.done == {"a": report}
    assert calls[0] == ("networking.liqo.io", tuple(storage_migration.CRDS)) and len(storage_migration.CRDS) == 7
    feature.leading(cs, False)
    feature.leading(cs, True)          # the Lease taken again: done already, not run again
    assert len(calls) == 2


def test_without_leader_election_it_runs_at_the_start(monkeypatch):
    calls = []
    monkeypatch.setattr(storage_migration.migration, "migrate", fake_migrate([[]], calls))
    feature = storage_migration.StorageMigration(engine())
    cs = cluster(leader=False)
    feature.start(cs)
    wait(feature, cs)
    assert len(calls) == 1 and feature.done == {"a": []}


def test_a_lost_lease_ends_the_retries(monkeypatch):
    calls = []
    failures = [api_storage_migration.MigrationError("webhook down")] * 1000
    monkeypatch.setattr(storage_migration.migration, "migrate", fake_migrate(failures, calls))
    feature = storage_migration.StorageMigration(engine(), retry=0.01)
    cs = cluster()
    feature.leading(cs, True)
    feature.leading(cs, False)
    wait(feature, cs)
    assert cs.name not in feature.done and len(calls) < 1000
