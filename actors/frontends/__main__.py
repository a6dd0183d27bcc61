from actors.frontends import console_main

console_main()
