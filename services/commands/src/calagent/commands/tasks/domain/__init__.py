"""The pure core of the tasks feature, like `commands/domain/`: no database, no bus, no wall
clock. Placement (greedy, then CP-SAT in `cpsat`) and a task's change applied to its fields."""
