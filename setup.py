"""Build hook: the top-level templates/ ship inside the wheel as derive/templates (package data).

The checkout keeps templates/ at the top (the layout of DESIGN.md); an installed
package finds the same files under derive/templates (derive.render.__main__.TEMPLATES).
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

TEMPLATES = Path(__file__).resolve().parent / "templates"


class build_py_with_templates(build_py):
    """build_py, then copy templates/ into the built package."""

    def run(self) -> None:
        super().run()
        shutil.copytree(TEMPLATES, Path(self.build_lib) / "derive" / "templates",
                        dirs_exist_ok=True)


setup(cmdclass={"build_py": build_py_with_templates})
