"""pyproject.toml's package metadata: its links are the project's (the workload chart's home) and name files
that exist, and its Python classifiers are the versions requires-python admits."""

from __future__ import annotations

import re

import tomllib
import yaml
from packaging.specifiers import SpecifierSet

from tests.support.paths import REPO, WORKLOAD_CHART

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
HOME = yaml.safe_load((WORKLOAD_CHART / "Chart.yaml").read_text())["home"]


def test_the_urls_are_the_projects_and_name_files_of_its_main_branch():
    urls = PROJECT["urls"]
    assert urls["Homepage"] == urls["Source"] == HOME
    for name, url in urls.items():
        assert url.startswith(HOME), name
        if match := re.fullmatch(rf"{re.escape(HOME)}/blob/main/(.+)", url):
            assert (REPO / match[1]).is_file(), name


def test_authors_keywords_and_classifiers_are_filled_in():
    assert PROJECT["authors"] and PROJECT["keywords"]
    assert len(set(PROJECT["classifiers"])) == len(PROJECT["classifiers"])


def test_the_python_classifiers_are_the_versions_requires_python_admits():
    listed = sorted(
        int(minor)
        for minor in re.findall(
            r"^Programming Language :: Python :: 3\.(\d+)$", "\n".join(PROJECT["classifiers"]), re.M
        )
    )
    assert listed, "each supported Python version is a classifier"
    admitted = SpecifierSet(PROJECT["requires-python"])
    assert all(f"3.{minor}" in admitted for minor in listed)
    assert f"3.{listed[0] - 1}" not in admitted, "from the oldest version admitted"
    assert listed == list(range(listed[0], listed[-1] + 1)), "no gap"
