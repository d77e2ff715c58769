"""`wevent ledger`: the upkeep of durable ledgers: `repair` a crashed writer's tail, `keygen` a
key pair for signed checkpoints."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from wevent._extras import missing_extra
from wevent.cli._common import EXIT_INTEGRITY, EXIT_OK, error_line, fail
from wevent.errors import InputError

__all__ = ["ledger_group"]


@click.group("ledger", short_help="Durable ledgers: repair a crashed writer's tail; signing keys.")
def ledger_group() -> None:
    """Upkeep of durable ledgers (chained .jsonl with its .head checkpoint, .wledger segment
    directories).

    \b
    Examples:
      wevent ledger repair run.jsonl
      wevent ledger keygen ledger.key
    """


@ledger_group.command("repair", short_help="Cut a crashed writer's uncommitted tail aside.")
@click.argument("ledger", type=click.Path(path_type=Path))
@click.option(
    "--public-key",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Also require the checkpoint to be signed with this key before touching the ledger.",
)
def repair_cmd(ledger: Path, public_key: Path | None) -> None:
    """Cut LEDGER's uncommitted tail so that its writer can continue.

    A crash can leave a torn last line, records past the last checkpoint (written, but their
    commit never returned) or a segment without its manifest line. They are moved, byte for
    byte, into a side file next to the ledger (LEDGER.cut, or the directory LEDGER.cut/ for a
    segment ledger) and the ledger is truncated to its last checkpoint. Nothing committed is
    touched: a ledger whose committed content does not verify is refused (exit 5) and left as
    it is. Exit 0 when the ledger was repaired or had nothing to repair; 2 on bad input.

    \b
    Examples:
      wevent ledger repair run.jsonl
      wevent ledger repair run.wledger
    """
    from wevent.accounting.durable import LedgerIntegrityError, repair

    try:
        done = repair(ledger, public_key=public_key)
    except LedgerIntegrityError as exc:
        if exc.integrity.state == "broken":
            click.echo(error_line(str(exc)), err=True)
            sys.exit(EXIT_INTEGRITY)
        fail(str(exc))
    except InputError as exc:
        fail(str(exc))
    except ModuleNotFoundError as exc:
        fail(missing_extra(exc, "ledger repair") or str(exc))
    click.echo(done.describe())
    sys.exit(EXIT_OK)


@ledger_group.command("keygen", short_help="Write an Ed25519 key pair for signed checkpoints.")
@click.argument("key", type=click.Path(path_type=Path))
@click.option(
    "--public",
    "public",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Where the public key goes [default: KEY.pub].",
)
def keygen_cmd(key: Path, public: Path | None) -> None:
    """Write a new Ed25519 private key to KEY (PEM, mode 0600) and its public key to KEY.pub.

    The writer of a durable ledger signs every checkpoint with the private key
    (ChainedJsonlWriter(path, signing_key=KEY)); the auditor verifies with the public key
    (wevent audit LEDGER --public-key KEY.pub). Existing files are never overwritten. Needs the
    sign extra.

    \b
    Example:
      wevent ledger keygen ledger.key
    """
    from wevent.accounting.signing import generate_key_pair

    target = public if public is not None else key.with_name(key.name + ".pub")
    try:
        digits = generate_key_pair(key, target)
    except InputError as exc:
        fail(str(exc))
    except ModuleNotFoundError as exc:
        fail(missing_extra(exc, "ledger keygen") or str(exc))
    except OSError as exc:
        fail(f"{exc.filename or key}: cannot write ({exc.strerror})")
    click.echo(f"private key: {key} (keep it with the writer)")
    click.echo(f"public key:  {target} (give it to the auditor): {digits}")
