// Where an s3:// storage URL points. Apart from the S3 adapter so that reading it does
// not load the AWS SDK (the embedded default never needs it).

export interface S3Location {
  bucket: string;
  /** '' or ends with '/'. */
  prefix: string;
}

export function parseS3Url(url: string): S3Location {
  const match = /^s3:\/\/([^/]+)\/?(.*)$/.exec(url);
  if (!match) throw new Error(`not an s3:// URL: ${url}`);
  const rest = (match[2] ?? '').replace(/^\/+|\/+$/g, '');
  return { bucket: match[1] ?? '', prefix: rest === '' ? '' : `${rest}/` };
}
