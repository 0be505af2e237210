from bv.cli import main

main()
