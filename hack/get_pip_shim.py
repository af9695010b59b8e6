"""Stand-in for ansible-test's downloaded get-pip.py (its host is unreachable here).

ansible-test runs it as `python get_pip.py <pip install options and packages>` inside a fresh venv.
Bootstraps pip with the standard library's ensurepip, then installs what was asked. The environment is
captured first: ensurepip points PIP_CONFIG_FILE at /dev/null, and the machine's pip configuration is what
carries the CA bundle and the package index settings. pip 23 rejects --no-setuptools / --no-wheel.
"""
import os
import subprocess
import sys

ENV = dict(os.environ)
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], env=ENV)
ARGS = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *ARGS], env=ENV))
