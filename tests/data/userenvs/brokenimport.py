"""A user's env module whose own import fails (a dependency that is not installed)."""

import a_dependency_that_is_not_installed  # noqa: F401
import gymnasium

gymnasium.register(id="BrokenImport-v0", entry_point="brokenimport:Never")
