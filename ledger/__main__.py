from ledger.app.cli.main import main

main()
