"""Pure time logic: symbols to instants, short replies to slot patches. No I/O, no clock."""
