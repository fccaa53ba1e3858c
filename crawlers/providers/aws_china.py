"""AWS China regions: the Price List bulk API of the China partition, quoted in CNY.

https://docs.amazonaws.cn/en_us/aws/latest/userguide/billing-and-payment.html

cn-north-1 (Beijing, operated by Sinnet) and cn-northwest-1 (Ningxia, operated by NWCD)
publish their EC2 offer files on an endpoint of their own,
``pricing.cn-north-1.amazonaws.com.cn``, under ``/offers/v1.0/cn/`` (not ``/aws/``). The
files have the global format, with ``pricePerUnit`` in ``CNY`` only, so the global
source's parser reads them (:class:`crawlers.providers.aws.AwsPriceList`): only the
endpoint, the path, the currency and the tax are this module's.

Tax: the list prices exclude VAT, which the bill adds as a line of its own
("VAT" next to the operators' items, https://www.clara.jp/media/?p=187).
"""

from __future__ import annotations

from crawlers.providers.aws import AwsPriceList

CHINA_BASE = "https://pricing.cn-north-1.amazonaws.com.cn"
CHINA_INDEX_PATH = "/offers/v1.0/cn/AmazonEC2/current/region_index.json"


class AwsChinaPriceList(AwsPriceList):
    name = "aws-china"
    provider = "aws"
    base_url = CHINA_BASE
    public_base = CHINA_BASE
    index_path = CHINA_INDEX_PATH
    currency = "CNY"
    tax_included = False
    max_bytes = 4 * 1024**3  # two regions' offer files
    docs_url = "https://docs.amazonaws.cn/en_us/aws/latest/userguide/billing-and-payment.html"
    terms_url = "https://www.amazonaws.cn/en/ec2/pricing/"
