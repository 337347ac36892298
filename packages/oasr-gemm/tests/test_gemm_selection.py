"""select_default_config: tier order (user ▸ system ▸ default), purity between reloads, the
rules (batch invariance, OASR_GEMM_HEURISTIC=0, GEMM_MIN_ROWS), sentinels, counts, misses."""

from __future__ import annotations

import json
import logging

import pytest
import torch

from oasr_gemm import configs, selection
from oasr_gemm.configs import GemmConfig
from oasr_jit import parse_arch, tuning

SMALL = GemmConfig(64, 128, 64, 1, 1, "pingpong")
WIDE = GemmConfig(128, 256, 64, 1, 1, "cooperative")
CLUSTERED = GemmConfig(128, 128, 64, 2, 1, "cooperative")


def _write(root, entries, configs_used) -> None:
    path = root / "sm90" / "gemm.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "schema": tuning.SCHEMA,
        "family": "gemm",
        "arch": "sm90",
        "lane": configs.LANE,
        "validators": {},
        "configs": {c.id: c.to_params() for c in configs_used},
        "entries": entries,
    }
    path.write_text(json.dumps(data))
    tuning.reload()


@pytest.fixture
def tiers(tmp_path, monkeypatch):
    """Empty user and system tiers under tmp_path; (user_root, system_root)."""
    user, system = tmp_path / "user", tmp_path / "system"
    monkeypatch.setenv("OASR_TUNE_USER_DB", str(user))
    monkeypatch.delenv("OASR_GEMM_HEURISTIC", raising=False)
    monkeypatch.setattr(selection._db, "system_dir", system)
    monkeypatch.setattr(selection, "_arch", parse_arch("9.0a"))
    monkeypatch.setattr(selection, "GEMM_MIN_ROWS", 1)  # the tiers alone; the rule has its test
    tuning.reload()
    selection.reset_counts()
    yield user, system
    tuning.reload()
    selection.reset_counts()


def test_tiers_in_order_and_counted(tiers):
    user, system = tiers
    key = tuning.signature("gemm", "gemm", "half", N=512, K=256)
    _write(system, {key: {"regions": [[256, SMALL.id], [None, WIDE.id]]}}, [SMALL, WIDE])
    pick = selection.select_default_config
    assert pick("gemm", 100, 512, 256, torch.float16) == selection.Selection(SMALL, "system")
    assert pick("gemm", 256, 512, 256, torch.bfloat16).config == SMALL  # dt=half serves bf16
    assert pick("gemm", 257, 512, 256, torch.float16).config == WIDE  # regions round M up
    # the user tier wins where it has the shape
    _write(user, {key: {"regions": [[128, CLUSTERED.id]]}}, [CLUSTERED])
    assert pick("gemm", 100, 512, 256, torch.float16) == selection.Selection(CLUSTERED, "user")
    assert pick("gemm", 200, 512, 256, torch.float16).tier == "system"  # past the user's regions
    other = pick("gemm", 100, 1024, 256, torch.float16)
    assert other == selection.Selection(configs.DEFAULT, "default")
    assert selection.tier_counts() == {"system": 4, "user": 1, "default": 1}
    assert selection.rule_miss_report() == [("gemm|op=gemm|dt=fp16|N=1024|K=256", 1)]


def test_a_snapshot_holds_until_reload(tiers):
    _, system = tiers
    key = tuning.signature("gemm", "gemm", "fp16", N=64, K=64)
    _write(system, {key: {"regions": [[None, SMALL.id]]}}, [SMALL])
    first = selection.select_default_config("gemm", 9, 64, 64, torch.float16)
    path = system / "sm90" / "gemm.json"
    data = json.loads(path.read_text())
    data["entries"][key]["regions"] = [[None, WIDE.id]]
    data["configs"] = {WIDE.id: WIDE.to_params()}
    path.write_text(json.dumps(data))
    assert selection.select_default_config("gemm", 9, 64, 64, torch.float16) == first
    tuning.reload()
    assert selection.select_default_config("gemm", 9, 64, 64, torch.float16).config == WIDE


def test_rules_and_sentinels(tiers, monkeypatch, caplog):
    _, system = tiers
    torch_key = tuning.signature("gemm", "gemm_activation", "fp16", N=80, K=64)
    bad_key = tuning.signature("gemm", "gemm", "fp16", N=80, K=64)
    bad = GemmConfig(64, 128, 64, 1, 1, "cooperative")  # rejected: cooperative needs M >= 128
    _write(
        system,
        {torch_key: {"regions": [[None, "torch"]]}, bad_key: {"regions": [[None, bad.id]]}},
        [bad],
    )
    pick = selection.select_default_config
    assert pick("gemm_activation", 8, 80, 64, torch.float16) == selection.Selection(None, "system")
    with caplog.at_level(logging.WARNING, logger="oasr_gemm"):
        assert pick("gemm", 8, 80, 64, torch.float16).config == configs.DEFAULT
    assert "not built" in caplog.text
    # batch invariance: one config for every M, whatever the tiers say
    for m in (1, 8, 100000):
        chosen = pick("gemm_activation", m, 80, 64, torch.float16, batch_invariant=True)
        assert chosen == selection.Selection(configs.DEFAULT, "batch_invariant")
    monkeypatch.setenv("OASR_GEMM_HEURISTIC", "0")
    assert pick("gemm_activation", 8, 80, 64, torch.float16).tier == "heuristic_off"
    monkeypatch.delenv("OASR_GEMM_HEURISTIC")
    monkeypatch.setattr(selection, "GEMM_MIN_ROWS", 16)
    assert pick("gemm", 15, 512, 512, torch.float16) == selection.Selection(None, "rule")
    assert pick("gemm", 16, 512, 512, torch.float16).tier == "default"
    # a tuning entry below GEMM_MIN_ROWS wins over the rule: measured data comes first
    assert pick("gemm_activation", 8, 80, 64, torch.float16) == selection.Selection(None, "system")
    _write(system, {bad_key: {"regions": [[None, SMALL.id]]}}, [SMALL])
    assert pick("gemm", 8, 80, 64, torch.float16) == selection.Selection(SMALL, "system")
    with pytest.raises(ValueError, match="op must be one of"):
        pick("bmm", 8, 8, 8, torch.float16)


def test_an_entry_may_name_an_sm80_config(tiers):
    _, system = tiers
    split = configs.Sm80Config(64, 64, 64, 32, 32, 4, "parallel", 4)
    key = tuning.signature("gemm", "gemm", "half", N=2048, K=512)
    _write(system, {key: {"regions": [[256, split.id], [4096, SMALL.id]]}}, [split, SMALL])
    pick = selection.select_default_config
    assert pick("gemm", 64, 2048, 512, torch.float16) == selection.Selection(split, "system")
    assert pick("gemm", 300, 2048, 512, torch.bfloat16) == selection.Selection(SMALL, "system")


def test_no_files_means_the_default(tiers):
    got = selection.select_default_config("gemm", 1000, 2048, 512, torch.bfloat16)
    assert got == selection.Selection(configs.DEFAULT, "default")
    assert selection.tuning_status()["system"]["loaded"] is False


def test_repeated_calls_are_counted_each_time(tiers):
    """A shape's selection is memoised (an eager call pays for it on every launch), but every
    call is still counted, misses included, and the memo does not outlive a reload."""
    _, system = tiers
    key = tuning.signature("gemm", "gemm", "half", N=512, K=256)
    _write(system, {key: {"regions": [[None, SMALL.id]]}}, [SMALL])
    pick = selection.select_default_config
    first = [pick("gemm", 100, 512, 256, torch.float16) for _ in range(3)]
    assert all(s is first[0] for s in first) and first[0].config == SMALL
    for _ in range(2):
        assert pick("gemm", 100, 640, 256, torch.float16).tier == "default"
    assert selection.tier_counts() == {"system": 3, "default": 2}
    assert selection.rule_miss_report() == [("gemm|op=gemm|dt=fp16|N=640|K=256", 2)]
    _write(system, {key: {"regions": [[None, WIDE.id]]}}, [WIDE])
    assert pick("gemm", 100, 512, 256, torch.float16).config == WIDE


def test_an_arch_without_a_table_runs_its_lane_default_and_says_so_once(
    tmp_path, monkeypatch, caplog
):
    """sm_86 (no shipped table, none in the user tier): the sm80 lane's default at every M (the
    M rule is sm_90's measurement), and one warning per process naming the architecture."""
    monkeypatch.setenv("OASR_TUNE_USER_DB", str(tmp_path / "user"))
    monkeypatch.delenv("OASR_GEMM_HEURISTIC", raising=False)
    monkeypatch.setattr(selection, "_arch", parse_arch("8.6"))
    monkeypatch.setattr(selection, "_untuned_reported", set())
    monkeypatch.setattr(selection, "_dbs", {"sm90": selection._db})
    tuning.reload()
    with caplog.at_level(logging.WARNING, logger="oasr_gemm"):
        for m in (1, 100, 8000):
            got = selection.select_default_config("gemm", m, 512, 256, torch.float16)
            assert got == selection.Selection(configs.SM80_DEFAULT, "default")
    warned = [r.getMessage() for r in caplog.records if "no tuning table" in r.getMessage()]
    assert len(warned) == 1 and "sm_86" in warned[0] and configs.SM80_DEFAULT.id in warned[0]
    batch = selection.select_default_config(
        "gemm", 5, 512, 256, torch.float16, batch_invariant=True
    )
    assert batch.config == configs.SM80_DEFAULT
    assert configs.production_configs("8.6") == (configs.SM80_DEFAULT, *configs.SM80_BASIS)
    assert configs.arch_reject_reason(configs.DEFAULT, "8.6") is not None  # no sm90 lane
    big = configs.Sm80Config(128, 128, 64, 64, 64, 4)  # 128 KiB: over sm_86's 99 KiB
    assert "shared memory" in configs.arch_reject_reason(big, "8.6")
    assert configs.arch_reject_reason(big, "8.0") is None
