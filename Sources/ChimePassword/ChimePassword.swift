// ChimePassword: password hashes (yescrypt) through the system's libcrypt (libxcrypt), for the
// console's accounts. The only code that imports CCrypt.
