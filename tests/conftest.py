"""The kit's own tests import the check modules (to call their helpers, to read their marks):
their `@pytest.mark.check(id)` is registered here as the judge's plugin registers it in a
grading session, so these imports warn of no unknown mark."""


def pytest_configure(config):
    config.addinivalue_line("markers", "check(id): the rubric check a check function scores")
