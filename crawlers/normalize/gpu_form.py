"""A GPU name's form factor read from its instance type's name, when only that says it.

Catalogs often name the GPU bare (``H100``) and put the variant in the instance type
(Lambda's ``gpu_1x_h100_pcie``, ``gpu_8x_a100_80gb_sxm4``, Cudo's ``intel-ice-lake-a800-pci``).
Without the form factor the GPU name parser falls back on the family default (H100 SXM);
with it, the stated part.
"""

from __future__ import annotations

import re

from schema.gpu_names import NameProblem, parse_gpu_name

_FORMS = {
    "pcie": "PCIe",
    "pci": "PCIe",
    "sxm": "SXM",
    "sxm2": "SXM",
    "sxm4": "SXM",
    "sxm5": "SXM",
    "nvl": "NVL",
}
_WORDS = re.compile(r"[a-z0-9]+")


def with_sku_form_factor(gpu_name: str, sku: str) -> str:
    """``gpu_name`` plus the one form factor ``sku`` names, if the name states none."""
    forms = {_FORMS[w] for w in _WORDS.findall(sku.lower()) if w in _FORMS}
    if len(forms) != 1:
        return gpu_name
    try:
        if parse_gpu_name(gpu_name).form_factors:
            return gpu_name
    except NameProblem:
        return gpu_name
    return f"{gpu_name} {forms.pop()}"
