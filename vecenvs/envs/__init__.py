"""Teaching environments, registered with gymnasium under the ``vecenvs/`` namespace."""
