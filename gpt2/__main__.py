import sys

from gpt2.cli import main

sys.exit(main())
