from rag_core.cli import main

raise SystemExit(main())
