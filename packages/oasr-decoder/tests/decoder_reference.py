"""Plain-Python references of the decoder tests, in float64 log space, and random posteriors.

Imported by name (tests/test_repository.py: helpers live in a uniquely named module).

The references follow the definitions of include/oasr/decoder/*.h literally, with none of the C++
search's pruning: every (prefix, token) pair of every frame is visited, and the context score is
computed from its definition (phrase occurrences and the longest phrase-prefix suffix), not with
failure links. They evaluate the same float64 expressions as C++ (log_add_exp as
max + log1p(exp(min - max)) with exp and log1p written out step for step as log_math.h, sums left
to right), so scores agree bit for bit, not only within rounding.
"""

from __future__ import annotations

import heapq
import math
import random

import torch

NEG_INF = -math.inf


_INV_LN2 = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10


def exp_nonpositive(x: float) -> float:
    """exp(x) for -40 <= x <= 0, step for step as log_math.h (the same bits as C++ and CUDA)."""
    k = math.floor(x * _INV_LN2 + 0.5)
    r = (x - k * _LN2_HI) - k * _LN2_LO
    r2 = r * r
    r4 = r2 * r2
    r8 = r4 * r4
    p01 = 1.0 + r
    p23 = 0.5 + r * (1.0 / 6.0)
    p45 = 1.0 / 24.0 + r * (1.0 / 120.0)
    p67 = 1.0 / 720.0 + r * (1.0 / 5040.0)
    p89 = 1.0 / 40320.0 + r * (1.0 / 362880.0)
    p1011 = 1.0 / 3628800.0 + r * (1.0 / 39916800.0)
    p1213 = 1.0 / 479001600.0 + r * (1.0 / 6227020800.0)
    p0_3 = p01 + p23 * r2
    p4_7 = p45 + p67 * r2
    p8_11 = p89 + p1011 * r2
    p = (p0_3 + p4_7 * r4) + (p8_11 + p1213 * r4) * r8
    return math.ldexp(p, k)


def log1p_unit(y: float) -> float:
    """log(1 + y) for 0 <= y <= 1, as log_math.h."""
    s = y / (2.0 + y)
    z = s * s
    z2 = z * z
    z4 = z2 * z2
    z8 = z4 * z4
    t12 = 1.0 / 3.0 + z * (1.0 / 5.0)
    t34 = 1.0 / 7.0 + z * (1.0 / 9.0)
    t56 = 1.0 / 11.0 + z * (1.0 / 13.0)
    t78 = 1.0 / 15.0 + z * (1.0 / 17.0)
    t910 = 1.0 / 19.0 + z * (1.0 / 21.0)
    t1112 = 1.0 / 23.0 + z * (1.0 / 25.0)
    t1314 = 1.0 / 27.0 + z * (1.0 / 29.0)
    t1516 = 1.0 / 31.0 + z * (1.0 / 33.0)
    t1_4 = t12 + t34 * z2
    t5_8 = t56 + t78 * z2
    t9_12 = t910 + t1112 * z2
    t13_16 = t1314 + t1516 * z2
    t = (t1_4 + t5_8 * z4) + (t9_12 + t13_16 * z4) * z8
    return 2.0 * (s + s * (z * t))


def log_add_exp(a: float, b: float) -> float:
    hi, lo = (a, b) if a > b else (b, a)
    d = lo - hi if hi != NEG_INF else math.nan
    if not d >= -40.0:
        return hi
    return hi + log1p_unit(exp_nonpositive(d))


# ---------------------------------------------------------------------------------------------
# greedy


def reference_greedy(rows: list[list[float]], blank: int) -> tuple[tuple, float, tuple]:
    """argmax per frame (lowest id on ties), collapse, drop blanks; score = sum of the maxima."""
    tokens, frames, score, previous = [], [], 0.0, blank
    for t, row in enumerate(rows):
        best = max(range(len(row)), key=lambda v: (row[v], -v))
        score += row[best]
        if best != blank and best != previous:
            tokens.append(best)
            frames.append(t)
        previous = best
    return tuple(tokens), score, tuple(frames)


# ---------------------------------------------------------------------------------------------
# context graph, from its definition


class ReferenceContext:
    """S(y) = committed(y) + partial(state(y)) by the definition of context_graph.h."""

    def __init__(self, phrases, bonuses):
        self.phrases = [tuple(p) for p in phrases]
        self.ends = set(self.phrases)
        edge: dict[tuple, float] = {}
        for phrase, bonus in zip(self.phrases, bonuses, strict=True):
            for i in range(1, len(phrase) + 1):
                q = phrase[:i]
                edge[q] = max(edge[q], bonus) if q in edge else bonus
        self.edge = edge  # every trie node but the root
        self._committed: dict[tuple, float] = {}

    def phi(self, node: tuple) -> float:
        acc = 0.0
        for i in range(1, len(node) + 1):
            acc = acc + self.edge[node[:i]]
        return acc

    def state(self, y: tuple) -> tuple:
        for i in range(len(y) + 1):  # longest suffix first
            if y[i:] in self.edge:
                return y[i:]
        return ()

    def partial(self, node: tuple) -> float:
        anchor = 0.0
        for i in range(len(node), 0, -1):
            if node[:i] in self.ends:
                anchor = self.phi(node[:i])
                break
        return self.phi(node) - anchor

    def output_at(self, y: tuple) -> float:
        """B of the phrases that are suffixes of y, summed right-nested from the longest (the
        order of C++'s output(n) = own + output(fail(n)))."""
        acc = 0.0
        for i in range(len(y), 0, -1):  # shortest suffix first, so the longest ends outermost
            if y[i - 1 :] in self.ends:
                acc = self.phi(y[i - 1 :]) + acc
        return acc

    def committed(self, y: tuple) -> float:
        if y not in self._committed:
            acc = 0.0
            for j in range(1, len(y) + 1):
                acc = acc + self.output_at(y[:j])
            self._committed[y] = acc
        return self._committed[y]

    def score(self, y: tuple, final: bool = False) -> float:
        y = tuple(y)
        committed = self.committed(y)
        return committed if final else committed + self.partial(self.state(y))


# ---------------------------------------------------------------------------------------------
# prefix beam search, visiting every (prefix, token) pair


class _Prefix:
    __slots__ = ("fb", "fnb", "pb", "pnb", "vb", "vnb")

    def __init__(self, pb, pnb, vb, vnb, fb, fnb):
        self.pb, self.pnb, self.vb, self.vnb, self.fb, self.fnb = pb, pnb, vb, vnb, fb, fnb


def reference_prefix_beam_search(
    rows: list[list[float]],
    beam_size: int,
    blank: int = 0,
    nbest: int = 1,
    blank_skip_threshold: float | None = None,
    context: ReferenceContext | None = None,
) -> list[tuple[tuple, float, tuple]]:
    """The n-best (tokens, score, frames) of the CTC prefix beam search of
    ctc_prefix_beam_search.h: sums per prefix (pb, pnb), the best alignment per prefix (vb, vnb,
    with its tokens' first frames), the beam ranked by (score desc, tokens asc).

    Every (prefix, token) pair of every frame is scored. Only the bookkeeping of the candidates
    that cannot be among the beam_size best scores (below the beam_size-th largest score, ties
    kept) is skipped, which keeps this fast enough to run thousands of cases."""
    log_threshold = math.inf if blank_skip_threshold is None else math.log(blank_skip_threshold)

    def ctx(y, final=False):
        return 0.0 if context is None else context.score(y, final)

    beam = {(): _Prefix(0.0, NEG_INF, 0.0, NEG_INF, (), ())}
    for t, row in enumerate(rows):
        if row[blank] > log_threshold:
            continue
        # The pnb term of y + (c,) for every prefix y and token c.
        terms = {}
        for y, p in beam.items():
            acoustic = log_add_exp(p.pb, p.pnb)
            term = [acoustic + v for v in row]
            if y:  # a repeat needs a blank between: from pb only
                term[y[-1]] = p.pb + row[y[-1]]
            term[blank] = NEG_INF
            terms[y] = term

        def best_alignment(p, y, c, row=row, t=t):
            """vnb term and frames of y + (c,) extending prefix p = y at frame t."""
            if y and c == y[-1]:
                return p.vb + row[c], (*p.fb, t)
            v, f = (p.vnb, p.fnb) if p.vnb >= p.vb else (p.vb, p.fb)  # ties: non-blank-ending
            return v + row[c], (*f, t)

        # Prefixes of the beam stay (blank, or a repeat), merged with the extension from their
        # parent when the parent is in the beam.
        candidates = []  # (score, y, prefix)
        for y, p in beam.items():
            acoustic = log_add_exp(p.pb, p.pnb)
            if p.vnb >= p.vb:
                vb, fb = p.vnb + row[blank], p.fnb
            else:
                vb, fb = p.vb + row[blank], p.fb
            stay_nb = p.pnb + row[y[-1]] if y else NEG_INF
            stay_v = p.vnb + row[y[-1]] if y else NEG_INF
            ext_nb, ext_v, ext_f = NEG_INF, NEG_INF, ()
            if y and y[:-1] in beam:
                ext_nb = terms[y[:-1]][y[-1]]
                ext_v, ext_f = best_alignment(beam[y[:-1]], y[:-1], y[-1])
            pnb = log_add_exp(stay_nb, ext_nb)
            vnb, fnb = (stay_v, p.fnb) if stay_v >= ext_v else (ext_v, ext_f)  # ties: the run
            pb = acoustic + row[blank]
            acoustic = log_add_exp(pb, pnb)
            if acoustic != NEG_INF:
                candidates.append((acoustic + ctx(y), y, _Prefix(pb, pnb, vb, vnb, fb, fnb)))

        # New prefixes y + (c,): score = pnb term + context score (lse(-inf, x) == x).
        new_scores = {}
        for y, term in terms.items():
            if context is None:
                new_scores[y] = [v + 0.0 for v in term]
            else:
                new_scores[y] = [v + ctx((*y, c)) for c, v in enumerate(term)]
        everything = [c[0] for c in candidates]
        for y, scores in new_scores.items():
            everything += [s for c, s in enumerate(scores) if (*y, c) not in beam]
        finite = [s for s in everything if s != NEG_INF]
        cut = heapq.nlargest(beam_size, finite)[-1] if len(finite) > beam_size else NEG_INF
        for y, scores in new_scores.items():
            p = beam[y]
            for c, score in enumerate(scores):
                if score == NEG_INF or score < cut or (*y, c) in beam:
                    continue
                vnb, fnb = best_alignment(p, y, c)
                prefix = _Prefix(NEG_INF, terms[y][c], NEG_INF, vnb, (), fnb)
                candidates.append((score, (*y, c), prefix))
        candidates.sort(key=lambda c: (-c[0], c[1]))
        beam = {y: p for _, y, p in candidates[:beam_size]}

    results = []
    for y, p in beam.items():
        score = log_add_exp(p.pb, p.pnb) + ctx(y, final=True)
        results.append((y, score, p.fnb if p.vnb >= p.vb else p.fb))
    results.sort(key=lambda r: (-r[1], r[0]))
    return results[:nbest]


# ---------------------------------------------------------------------------------------------
# random posteriors

KINDS = ("smooth", "peaky", "ties", "masked", "flat")


def random_log_probs(rng: random.Random, num_frames: int, vocab: int, kind: str, blank: int = 0):
    """[T, V] float32 log-probabilities of one of KINDS:

    smooth  log_softmax of N(0, 1) logits
    peaky   CTC-like: large logits, the blank boosted on most frames
    ties    integer logits in a small range: many exactly equal log-probs (tie-breaks)
    masked  smooth with about a third of the entries -inf (blank never)
    flat    every row uniform: everything ties
    """
    gen = torch.Generator().manual_seed(rng.getrandbits(62))
    if kind == "smooth":
        logits = torch.randn(num_frames, vocab, generator=gen)
    elif kind == "peaky":
        logits = 4 * torch.randn(num_frames, vocab, generator=gen)
        logits[:, blank] += 6 * (torch.rand(num_frames, generator=gen) < 0.7)
    elif kind == "ties":
        logits = torch.randint(0, 3, (num_frames, vocab), generator=gen).float()
    elif kind == "masked":
        logits = torch.randn(num_frames, vocab, generator=gen)
        mask = torch.rand(num_frames, vocab, generator=gen) < 0.35
        mask[:, blank] = False
        logits[mask] = -math.inf
    elif kind == "flat":
        logits = torch.zeros(num_frames, vocab)
    else:
        raise ValueError(kind)
    return torch.log_softmax(logits, dim=-1).float()


def rows_of(log_probs: torch.Tensor) -> list[list[float]]:
    """[T, V] float32 as Python floats (exact: float32 -> float64)."""
    return log_probs.double().tolist()


def log_uniform_int(rng: random.Random, low: int, high: int) -> int:
    """An int in [low, high], log-uniformly (most cases small, some large)."""
    return min(high, int(math.exp(rng.uniform(math.log(low), math.log(high + 1)))))


def random_case(
    rng: random.Random, *, max_frames: int = 120, max_vocab: int = 300, max_beam: int = 16
) -> dict:
    """One random decoding problem: log_probs [T, V] and search settings. T, V log-uniform (odd
    sizes, most of them small), the blank first, last or anywhere, sometimes a blank-skip
    threshold."""
    num_frames = log_uniform_int(rng, 1, max_frames)
    vocab = log_uniform_int(rng, 2, max_vocab)
    beam_size = rng.randint(1, max_beam)
    blank = rng.choice([0, 0, vocab - 1, rng.randrange(vocab)])
    kind = rng.choice(KINDS)
    return dict(
        log_probs=random_log_probs(rng, num_frames, vocab, kind, blank),
        kind=kind,
        beam_size=beam_size,
        blank=blank,
        nbest=rng.randint(1, beam_size),
        blank_skip_threshold=rng.choice([None, None, None, 0.5, 0.9, 0.999]),
    )


def random_phrases(rng: random.Random, vocab: int, blank: int, count: int, max_len: int = 4):
    """`count` random phrases over the non-blank tokens of a vocabulary of V tokens, with
    per-token bonuses (some negative, some not exactly representable in binary)."""
    tokens = [v for v in range(vocab) if v != blank]
    phrases = [[rng.choice(tokens) for _ in range(rng.randint(1, max_len))] for _ in range(count)]
    bonuses = [rng.choice([0.5, 1.0, 1.5, 2.0, 0.3, 3.1, -0.25]) for _ in phrases]
    return phrases, bonuses
