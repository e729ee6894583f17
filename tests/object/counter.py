"""The fleet test's tool: appends LABEL as a line of the counter object, a compare-and-swap
(If-Match on the version read, If-None-Match: * to create it) tried again until it wins.

Usage: python counter.py ENDPOINT BUCKET KEY LABEL

Sleeps a little first, so that a worker killed during a call is often killed inside one.
"""

import sys
import time

import boto3
import botocore

endpoint, bucket, key, label = sys.argv[1:5]
s3 = boto3.client(
    "s3",
    endpoint_url=endpoint,
    aws_access_key_id="test",
    aws_secret_access_key="test",
    region_name="us-east-1",
)
time.sleep(0.2)
while True:
    try:
        got = s3.get_object(Bucket=bucket, Key=key)
        body, condition = got["Body"].read(), {"IfMatch": got["ETag"]}
    except s3.exceptions.NoSuchKey:
        body, condition = b"", {"IfNoneMatch": "*"}
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=body + label.encode() + b"\n", **condition)
        break
    except botocore.exceptions.ClientError as error:
        if error.response["Error"]["Code"] not in ("PreconditionFailed", "ConditionalRequestConflict"):
            raise
print(f"counted {label}")
