"""`python -m hina`: the `hina` command line (`hina.host.cli`)."""

import sys

from hina.host.cli import main

sys.exit(main())
