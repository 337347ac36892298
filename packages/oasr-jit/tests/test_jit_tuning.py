"""The tuning database (oasr_jit.tuning): file format and validators, region lookup (round up,
catch-all, fall-through), tier order, dtype fallback, epochs, counters, staleness, and writers
that merge under the file's lock."""

from __future__ import annotations

import json
import multiprocessing
import os

import pytest

from oasr_jit import tuning
from oasr_jit.tuning import Resolution, TuningDB, TuningFileError, signature, write_entries

SIG = signature("gemm", "gemm", "half", N=512, K=256)
CONFIGS = {"small": {"tile": [64, 64, 64], "stages": 3}, "big": {"tile": [128, 128, 64]}}


def _file(entries=None, configs=CONFIGS, **over):
    data = {
        "schema": tuning.SCHEMA,
        "family": "gemm",
        "arch": "sm90",
        "lane": None,
        "validators": {"cutlass": "4.2"},
        "configs": configs,
        "entries": entries or {},
    }
    data.update(over)
    return data


def _write(root, data, arch="sm90"):
    path = root / arch / "gemm.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def tiers(tmp_path, monkeypatch):
    user, system = tmp_path / "user", tmp_path / "system"
    monkeypatch.setenv("OASR_TUNE_USER_DB", str(user))
    tuning.reload()
    return user, system


def test_signature_and_dtypes():
    assert SIG == "gemm|op=gemm|dt=half|N=512|K=256"
    assert tuning.dtype_key("torch.bfloat16") == "bf16" and tuning.dtype_key("float16") == "fp16"
    with pytest.raises(ValueError, match="no tuning dtype"):
        tuning.dtype_key("int8")


def test_regions_round_up_and_the_catch_all(tiers):
    _, system = tiers
    _write(system, _file({SIG: {"regions": [[512, "small"], [2048, "big"], [None, "torch"]]}}))
    db = TuningDB("gemm", "sm90", system)
    got = {m: db.resolve("gemm", "fp16", m, N=512, K=256).config for m in (1, 512, 513, 2048, 9999)}
    assert got == {1: "small", 512: "small", 513: "big", 2048: "big", 9999: "torch"}
    assert db.config(db.resolve("gemm", "bf16", 100, N=512, K=256)) == CONFIGS["small"]
    assert db.config(db.resolve("gemm", "bf16", 5000, N=512, K=256)) is None  # a sentinel


def test_no_catch_all_falls_through_to_the_next_tier_then_default(tiers):
    user, system = tiers
    _write(user, _file({SIG: {"regions": [[256, "big"]]}}))
    _write(system, _file({SIG: {"regions": [[1024, "small"]]}}))
    db = TuningDB("gemm", "sm90", system)
    assert db.resolve("gemm", "fp16", 200, N=512, K=256) == Resolution("big", "user", SIG)
    assert db.resolve("gemm", "fp16", 300, N=512, K=256) == Resolution("small", "system", SIG)
    assert db.resolve("gemm", "fp16", 3000, N=512, K=256) == Resolution("default", "default")
    assert db.resolve("gemm", "fp16", 3000, N=512, K=256).tier == "default"
    assert db.counts == {"user": 1, "system": 1, "default": 2}
    assert db.miss_report() == [("gemm|op=gemm|dt=fp16|N=512|K=256", 2)]


def test_a_dtype_entry_wins_over_half(tiers):
    _, system = tiers
    own = signature("gemm", "gemm", "bf16", N=512, K=256)
    _write(system, _file({SIG: {"regions": [[None, "small"]]}, own: {"regions": [[None, "big"]]}}))
    db = TuningDB("gemm", "sm90", system)
    assert db.resolve("gemm", "bf16", 8, N=512, K=256).config == "big"
    assert db.resolve("gemm", "fp16", 8, N=512, K=256).config == "small"
    assert db.resolve("gemm", "fp32", 8, N=512, K=256).tier == "default"  # half is 16-bit only


@pytest.mark.parametrize(
    "over, match",
    [
        ({"schema": 99}, "schema"),
        ({"family": "conv"}, "family"),
        ({"arch": "sm80"}, "arch"),
        ({"entries": {SIG: {"regions": [[None, "small"], [64, "big"]]}}}, "last region"),
        ({"entries": {SIG: {"regions": [[64, "small"], [64, "big"]]}}}, "ascending"),
        ({"entries": {SIG: {"regions": [[0, "small"]]}}}, "ascending"),
        ({"entries": {SIG: {"regions": [[64, "nope"]]}}}, "not in the file's configs"),
        ({"entries": {SIG: {"regions": []}}}, "no regions"),
        ({"configs": {"torch": {}}}, "sentinels"),
    ],
)
def test_unusable_files_are_skipped_with_a_warning(tiers, over, match, caplog):
    _, system = tiers
    _write(system, _file(**{"entries": {SIG: {"regions": [[None, "small"]]}}, **over}))
    with pytest.raises(TuningFileError, match=match):
        tuning.TuningFile.parse(
            json.loads((system / "sm90" / "gemm.json").read_text()), family="gemm", arch="sm90"
        )
    db = TuningDB("gemm", "sm90", system)
    with caplog.at_level("WARNING", logger="oasr_jit"):
        assert db.resolve("gemm", "fp16", 8, N=512, K=256).tier == "default"
    assert "skipped" in caplog.text and match.split()[0] in caplog.text


def test_bad_json_is_skipped(tiers, caplog):
    _, system = tiers
    (system / "sm90").mkdir(parents=True)
    (system / "sm90" / "gemm.json").write_text("{not json")
    with caplog.at_level("WARNING", logger="oasr_jit"):
        assert (
            TuningDB("gemm", "sm90", system).resolve("gemm", "fp16", 8, N=1, K=1).tier == "default"
        )
    assert "skipped" in caplog.text


def test_user_tier_off_and_epochs(tiers, monkeypatch):
    user, system = tiers
    _write(user, _file({SIG: {"regions": [[None, "big"]]}}))
    db = TuningDB("gemm", "sm90", system)
    assert db.resolve("gemm", "fp16", 8, N=512, K=256).config == "big"
    # a changed file is not seen inside an epoch: selections stay fixed until reload()
    _write(user, _file({SIG: {"regions": [[None, "small"]]}}))
    assert db.resolve("gemm", "fp16", 8, N=512, K=256).config == "big"
    tuning.reload()
    assert db.resolve("gemm", "fp16", 8, N=512, K=256).config == "small"
    monkeypatch.setenv("OASR_TUNE_USER_DB", "off")
    tuning.reload()
    assert tuning.user_dir() is None
    assert db.resolve("gemm", "fp16", 8, N=512, K=256).tier == "default"


def test_repeated_lookups_are_memoised_and_counted(tiers):
    """The per-call path (every eager GEMM) serves a repeated lookup from the memo, whatever
    spelling of the dtype, yet counts each call and each miss; `epoch` moves with reload()."""
    _, system = tiers
    _write(system, _file({SIG: {"regions": [[None, "small"]]}}))
    db = TuningDB("gemm", "sm90", system)
    epoch = db.epoch
    hits = [db.resolve("gemm", dt, 8, N=512, K=256) for dt in ("fp16", "fp16", "float16")]
    assert all(r == Resolution("small", "system", SIG) for r in hits)
    assert hits[0] is hits[1]  # the memo's own object
    for _ in range(3):
        assert db.resolve("gemm", "bf16", 8, N=640, K=256).tier == "default"
    assert db.counts == {"system": 3, "default": 3}
    assert db.miss_report() == [(signature("gemm", "gemm", "bf16", N=640, K=256), 3)]
    assert db.epoch == epoch
    tuning.reload()
    assert db.epoch == epoch + 1


def test_status_marks_stale_files_and_entries(tiers):
    _, system = tiers
    _write(system, _file({SIG: {"regions": [[None, "small"]], "soft": {"cutlass": "4.1"}}}))
    fresh = TuningDB("gemm", "sm90", system, soft_validators={"cutlass": "4.2"}).status()
    assert fresh["system"]["loaded"] and fresh["system"]["entries"] == 1
    assert fresh["system"]["stale"]  # its entry was measured under 4.1
    assert not fresh["user"]["loaded"]


def test_writers_merge_under_the_lock(tiers):
    user, _ = tiers
    path = user / "sm90" / "gemm.json"
    other = signature("gemm", "gemm", "half", N=1024, K=256)
    write_entries(
        path,
        family="gemm",
        arch="sm90",
        entries={SIG: {"regions": [[None, "small"]]}},
        configs=CONFIGS,
        validators={"cutlass": "4.1"},
    )
    write_entries(
        path,
        family="gemm",
        arch="sm90",
        entries={other: {"regions": [[64, "big"]]}},
        configs={"big": CONFIGS["big"]},
        validators={"cutlass": "4.2"},
    )
    data = json.loads(path.read_text())
    assert set(data["entries"]) == {SIG, other}
    assert data["entries"][SIG]["soft"] == {"cutlass": "4.1"}  # kept with its own validators
    assert data["validators"] == {"cutlass": "4.2"}
    assert set(data["configs"]) == {"small", "big"}
    db = TuningDB("gemm", "sm90", None)
    assert db.resolve("gemm", "fp16", 64, N=1024, K=256) == Resolution("big", "user", other)
    with pytest.raises(TuningFileError, match="not in the file's configs"):
        write_entries(
            path,
            family="gemm",
            arch="sm90",
            entries={SIG: {"regions": [[8, "x"]]}},
            configs={},
            validators={},
        )
    fresh = write_entries(
        path,
        family="gemm",
        arch="sm90",
        fresh=True,
        configs={},
        entries={SIG: {"regions": [[None, "torch"]]}},
        validators={},
    )
    assert set(fresh.entries) == {SIG} and fresh.configs == {}


def _writer(path: str, index: int) -> None:
    key = signature("gemm", "gemm", "half", N=64 * (index + 1), K=64)
    write_entries(
        path,
        family="gemm",
        arch="sm90",
        entries={key: {"regions": [[None, "torch"]]}},
        configs={},
        validators={},
    )


def test_concurrent_writers_all_survive(tmp_path):
    path = tmp_path / "sm90" / "gemm.json"
    ctx = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), i)) for i in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(json.loads(path.read_text())["entries"]) == 6
