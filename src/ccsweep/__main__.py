from ccsweep.cli import main

main()
