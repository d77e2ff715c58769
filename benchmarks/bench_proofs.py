"""Proof time per allocator and scope (run on demand: `make bench`).

Bounded proofs (one Z3 check per window shape and parameter case over the whole horizon) and
k-induction (base case of 2 * max w slots plus one step per slot residue) for the fixed-window
kernels; bounded proofs and the one-slot induction (`wevent.proofs.dynamic`, every horizon) for the
dynamic kernels; the explicit float-count search. Measurements,
not tests: the numbers go to wevent/proofs/README.md.
"""

from __future__ import annotations

import argparse

from wevent.proofs.central import ALLOCATORS, Scope, prove_allocator

FIXED = ("uniform", "sample", "bd", "ba", "pbd", "pba")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small scopes only")
    parser.add_argument(
        "--family", choices=("all", "fixed", "dynamic"), default="all", help="which kernels"
    )
    args = parser.parse_args()
    widths = (3,) if args.quick else (3, 6)
    print(
        "| allocator | variant | arithmetic | method | classes | w_max | horizon | cases | status | seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")

    def show(name: str, variant: str, arithmetic: str, scope: Scope, unbounded: bool) -> None:
        p = prove_allocator(
            name, variant=variant, arithmetic=arithmetic, scope=scope, unbounded=unbounded
        )
        horizon = "unbounded" if unbounded else str(scope.slots)
        if ALLOCATORS[name].requirement == "dynamic":
            horizon += f" (declarations at {', '.join(map(str, scope.decl_slots))})"
        print(
            f"| {name} | {variant} | {arithmetic} | {p.method} | 1..{scope.classes} | "
            f"{scope.w_max} | {horizon} | {p.cases} | {p.status} | {p.seconds:.2f} |",
            flush=True,
        )

    for name in FIXED if args.family in ("all", "fixed") else ():
        for w in widths:
            for k in (1, 2):
                show(name, "sound", "exact", Scope(k, w), False)
            show(name, "sound", "exact", Scope(2, w), True)
        show(name, "sound", "float", Scope(1, 3), False)
        show(name, "published", "float", Scope(1, 3), False)
    for name in ("dpbd", "dpba") if args.family in ("all", "dynamic") else ():
        show(name, "sound", "exact", Scope(1, 2), False)
        show(name, "published", "exact", Scope(1, 2), False)
        for w in (3,) if args.quick else (3, 4):
            show(name, "sound", "exact", Scope(2, w), True)
        show(name, "sound", "exact", Scope(2, 6, decl_slots=(1,)), True)


if __name__ == "__main__":
    main()
