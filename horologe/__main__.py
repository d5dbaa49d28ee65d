from horologe.cli import main

main()
