"""Development tooling: the servers `calagent up` and the tests start on loopback (NATS, PostgreSQL,
Radicale, Xandikos) and the test helpers built on them. Used by the CLI and the tests, never by a
service."""
