from wevent.cli import main

main()
