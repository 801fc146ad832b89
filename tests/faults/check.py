#!/usr/bin/env python3
"""Crash-suite checks on top of `hfctl reconcile` (standard library only).

  check.py records VERDICT.json
      prints the per-topic record counts of a reconcile verdict, one canonical
      line (the suite compares two of them to decide the system is idle).

  check.py only-kinds VERDICT.json KIND[,KIND...]
      exit 0 when every violation of the verdict is of one of these kinds.

  check.py caught VERDICT.json REQUIRED[,...] [ALLOWED[,...]]
      exit 0 when the verdict is FAIL with at least one violation of every
      REQUIRED kind (an entry a|b: of a or b) and none outside REQUIRED + ALLOWED (a planted-violation run:
      the reconciler caught each forgery and blamed nothing else).

  check.py verify --verdict V.json --requests REQ.jsonl --replies REP.jsonl
                  [--bench=SUMMARY.json ...] [--partial-bench]
      REQ/REP are `hfctl tail` of the requests and replies topics
      (read_committed). Proves, beyond reconcile's own checks:
        * every request that reached the requests topic (reserve, commit,
          release; each idempotency key) got at least one reply, and all
          replies of one key carry one outcome: nothing lost, nothing answered
          twice differently;
        * reconcile's counts agree with those replies: one ledger reservation
          per reserve not rejected as invalid, rejected = REJECTED_INSUFFICIENT
          answers, committed/released = COMMITTED/RELEASED answers to commits
          and releases, and every HELD answer ended in exactly one of
          committed, released, expired (or is still held);
        * no dead letters; nothing left held unless --partial-bench (an
          hfbench that died cannot have sent its settles);
        * hfbench's own view (each summary): every reserve it sent got a reply
          (without_reply = 0), duplicates agreed, nothing oversold, and its
          reserve and HELD totals equal the topics' (its "hb-" reservations;
          the "hw-" warm-up ones are not in its summary).
      Prints a one-line JSON summary; exit 0 when all hold, 1 otherwise."""
import argparse
import json
import sys


def load_line(path):
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                return json.loads(line)
    raise SystemExit(f"{path}: no JSON line")


def records(path):
    v = load_line(path)
    recs = v.get("counts", {}).get("records")
    if recs is None:
        raise SystemExit(f"{path}: no records (verdict {v.get('verdict')})")
    print(" ".join(f"{k}={recs[k]}" for k in sorted(recs)))


def tail(path):
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                yield json.loads(line)


def verify(args):
    problems = []
    v = load_line(args.verdict)
    c = v.get("counts", {})
    if v.get("verdict") != "PASS" or v.get("violations_total", 1) != 0:
        problems.append(f"reconcile verdict {v.get('verdict')} with {v.get('violations_total')} violations")
    if not v.get("quiescent_enforced"):
        problems.append("reconcile ran without --quiescent")

    kinds = {"Reserve": "reserve", "Commit": "commit", "Release": "release", "Extend": "extend",
             "PaymentEvent": "payment"}
    requested = {}  # (rid, key) -> kind
    for r in tail(args.requests):
        val = r.get("value") or {}
        kind = kinds.get(val.get("type"))
        if kind is None:
            problems.append(f"requests p{r['partition']}@{r['offset']}: not a request: {val.get('type')}")
            continue
        requested.setdefault((val["reservation_id"], val["idempotency_key"]), kind)

    outcomes = {}  # (rid, key) -> set of outcomes
    replies_n = {}
    busy_after = []  # keys answered BUSY after an applied answer (replies of a key share a partition)
    for r in tail(args.replies):
        val = r.get("value") or {}
        k = (val.get("reservation_id"), val.get("idempotency_key"))
        o = val.get("outcome")
        if o == "BUSY" and any(x != "BUSY" for x in outcomes.get(k, ())):
            busy_after.append(k)
        outcomes.setdefault(k, set()).add(o)
        replies_n[k] = replies_n.get(k, 0) + 1
    if busy_after:
        problems.append(f"{len(busy_after)} keys answered BUSY after they were applied, e.g. "
                        f"{sorted(busy_after)[:5]}")

    # BUSY (load shedding) is no outcome: the request was not applied, and a
    # retry of it may well be answered otherwise.
    for o in outcomes.values():
        if len(o) > 1:
            o.discard("BUSY")
    lost = [k for k in requested if k not in outcomes]
    twice = [k for k, o in outcomes.items() if len(o) != 1]
    foreign = [k for k in outcomes if k not in requested]
    if lost:
        problems.append(f"{len(lost)} requests never answered, e.g. {sorted(lost)[:5]}")
    if twice:
        problems.append(f"{len(twice)} idempotency keys answered with different outcomes, e.g. "
                        f"{[(k, sorted(outcomes[k])) for k in sorted(twice)[:5]]}")
    if foreign:
        problems.append(f"{len(foreign)} replies to requests never sent, e.g. {sorted(foreign)[:5]}")

    tally = {}
    for k, kind in requested.items():
        o = next(iter(outcomes[k])) if k in outcomes and len(outcomes[k]) == 1 else "LOST"
        tally.setdefault(kind, {}).setdefault(o, 0)
        tally[kind][o] += 1
    res = tally.get("reserve", {})
    reserves = sum(res.values())
    held = res.get("HELD", 0)
    insufficient = res.get("REJECTED_INSUFFICIENT", 0)
    invalid = res.get("REJECTED_INVALID", 0)
    busy = res.get("BUSY", 0)  # shed, never applied
    committed = tally.get("commit", {}).get("COMMITTED", 0)
    # A canceled payment (hfbench --canceled-pct) releases its reservation too.
    released = (tally.get("release", {}).get("RELEASED", 0) +
                tally.get("payment", {}).get("RELEASED", 0))

    def agree(name, got, want):
        if got != want:
            problems.append(f"reconcile {name} = {got}, expected {want} from the replies")

    agree("reservations", c.get("reservations"), reserves - invalid - busy)
    agree("rejected", c.get("rejected"), insufficient)
    # A payment after expiry that re-reserved its lines is answered COMMITTED
    # while its reservation stays EXPIRED (late_payment_policy rereserve).
    agree("committed + late_rereserved", c.get("committed", 0) + c.get("late_rereserved", 0),
          committed)
    agree("released", c.get("released"), released)
    ended = c.get("committed", 0) + c.get("released", 0) + c.get("expired", 0) + c.get("held", 0)
    agree("committed + released + expired + held", ended, held)
    if c.get("dead_letters", 0) != 0:
        problems.append(f"{c.get('dead_letters')} dead letters")
    if not args.partial_bench and c.get("held", 0) != 0:
        problems.append(f"{c.get('held')} reservations still held at the end (a settle was lost?)")
    if c.get("ledger_held_units") != c.get("counter_reserved_units"):
        problems.append(f"ledger holds {c.get('ledger_held_units')} units, counters reserve "
                        f"{c.get('counter_reserved_units')}")

    bench_reserves = bench_held = 0
    for path in args.bench:
        b = load_line(path)
        bench_reserves += b.get("reserves", 0)
        bench_held += b.get("held", 0)
        if b.get("without_reply", 1) != 0:
            problems.append(f"{path}: {b.get('without_reply')} reserves without a reply")
        if b.get("duplicate_mismatches", 1) != 0:
            problems.append(f"{path}: {b.get('duplicate_mismatches')} duplicate replies disagreed")
        late = b.get("late_payments", {})
        if late.get("other", 0) != 0:
            problems.append(f"{path}: {late['other']} late payments answered neither COMMITTED "
                            "nor EXPIRED")
        if late.get("committed", 0) + late.get("expired", 0) != late.get("sent", 0):
            problems.append(f"{path}: {late.get('sent')} late payments sent, "
                            f"{late.get('committed', 0) + late.get('expired', 0)} answered")
        pay = b.get("payment_events", {})
        if pay.get("declined_other", 0) != 0:
            problems.append(f"{path}: {pay['declined_other']} declined cards answered other than "
                            "HELD (payment_policy keeps the hold for the next card)")
        if b.get("doorbuster", {}).get("oversold", 0) != 0:
            problems.append(f"{path}: doorbuster oversold by {b['doorbuster']['oversold']}")
    # hfbench's measured reserves are "hb-<seed>-<n>"; its warm-up ones ("hw-")
    # are not in its summary.
    hb = [k for k, kind in requested.items() if kind == "reserve" and k[0].startswith("hb-")]
    hb_held = sum(1 for k in hb if outcomes.get(k) == {"HELD"})
    if args.bench and not args.partial_bench:
        if bench_reserves != len(hb):
            problems.append(f"hfbench sent {bench_reserves} reserves, the requests topic holds {len(hb)}")
        if bench_held != hb_held:
            problems.append(f"hfbench saw {bench_held} HELD, the replies topic holds {hb_held}")

    summary = {
        "ok": not problems,
        "requests": len(requested),
        "replies": sum(replies_n.values()),
        "reserve_outcomes": res,
        "commit_outcomes": tally.get("commit", {}),
        "release_outcomes": tally.get("release", {}),
        "payment_outcomes": tally.get("payment", {}),
        "reconcile": {k: c.get(k) for k in ("reservations", "held", "committed", "released",
                                             "expired", "rejected", "late_payments",
                                             "late_rereserved", "holds", "dead_letters",
                                             "gateway_expiry_lag_ms_max")},
        "bench": {"reserves": bench_reserves, "held": bench_held, "summaries": len(args.bench)},
        "problems": problems,
    }
    print(json.dumps(summary, separators=(",", ":")))
    return 0 if not problems else 1


def only_kinds(path, allowed):
    """Exit 0 when every violation of the verdict is of an allowed kind."""
    v = load_line(path)
    kinds = v.get("violations_by_kind", {})
    c = v.get("counts", {})
    print(json.dumps({"verdict": v.get("verdict"), "violations_by_kind": kinds,
                      "gateway_expiry_lag_ms_max": c.get("gateway_expiry_lag_ms_max"),
                      "gateway_expiry_lag_ms_p99": c.get("gateway_expiry_lag_ms_p99"),
                      "counter_expiry_lag_ms_max": c.get("counter_expiry_lag_ms_max"),
                      "expiries": c.get("expiries")}, separators=(",", ":")))
    return 0 if set(kinds) <= set(allowed) and v.get("verdict") in ("PASS", "FAIL") else 1


def caught(path, required, allowed):
    """Exit 0 when a FAIL verdict names every required kind and nothing else."""
    v = load_line(path)
    kinds = v.get("violations_by_kind", {})
    # A required entry "a|b" is met by either kind (an orphan hold taken from an
    # escrow allotment is blamed on the allotment's books, not on the counters).
    missing = [k for k in required if not any(kinds.get(a) for a in k.split("|"))]
    named = {a for k in required for a in k.split("|")}
    foreign = sorted(set(kinds) - named - set(allowed))
    print(json.dumps({"verdict": v.get("verdict"), "violations_by_kind": kinds,
                      "missing": missing, "unexpected": foreign}, separators=(",", ":")))
    return 0 if v.get("verdict") == "FAIL" and not missing and not foreign else 1


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "records":
        records(sys.argv[2])
        return 0
    if len(sys.argv) >= 4 and sys.argv[1] == "caught":
        allowed = sys.argv[4].split(",") if len(sys.argv) >= 5 else []
        return caught(sys.argv[2], sys.argv[3].split(","), allowed)
    if len(sys.argv) >= 4 and sys.argv[1] == "only-kinds":
        return only_kinds(sys.argv[2], sys.argv[3].split(","))
    p = argparse.ArgumentParser()
    p.add_argument("cmd", choices=["verify"])
    p.add_argument("--verdict", required=True)
    p.add_argument("--requests", required=True)
    p.add_argument("--replies", required=True)
    p.add_argument("--bench", action="append", default=[])
    p.add_argument("--partial-bench", action="store_true")
    return verify(p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
