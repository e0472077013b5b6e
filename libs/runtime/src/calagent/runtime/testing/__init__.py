"""Test infrastructure shared by every tier: real servers, from wherever they can come."""
