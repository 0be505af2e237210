from bv.cli.app import main

main()
