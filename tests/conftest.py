"""Hypothesis settings: no per-example deadline (CI machines are shared and slow at times), and
on CI (CI=true) a derandomized run, so a submission's verdict does not depend on a random seed.
Locally each run explores new examples."""

import os

from hypothesis import settings

settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
