"""The pure core of the command service: no database, no bus, no wall clock.

`now` and the user's zone are always arguments, so every rule here is a function of its input.
"""
