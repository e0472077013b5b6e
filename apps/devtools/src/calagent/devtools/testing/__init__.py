"""Test infrastructure shared by every tier: real servers, from wherever they can come."""

# The token secret tests sign with; the system itself never falls back to any known secret.
TEST_AUTH_SECRET = "calagent-test-secret-only-ever-used-by-tests"
