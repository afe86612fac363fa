from nnconform.cli import console_main

console_main()
