from benchbench.cli import entry

entry()
