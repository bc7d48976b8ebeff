"""`python -m rag_core COMMAND`: the command line (`rag_core.cli`)."""

from rag_core.cli import main

raise SystemExit(main())
