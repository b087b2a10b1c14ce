// Checks answers against the served OpenAPI document, with Ajv's 2020-12 dialect (OpenAPI 3.1's).
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

export class OpenApiChecker {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });

  constructor(private readonly doc: any) {
    addFormats.default(this.ajv);
    this.ajv.addSchema(doc, 'doc');
  }

  /** Throws unless the doc declares this answer and its JSON body fits the declared schema. */
  check(method: string, path: string, status: number, contentType: string | null, body: unknown): void {
    const op = this.doc.paths[path]?.[method.toLowerCase()];
    if (!op) throw new Error(`${method} ${path} is not in the OpenAPI document`);
    const response = op.responses[String(status)];
    if (!response) throw new Error(`${method} ${path} → ${status} is not declared`);
    if (status === 304 || body === undefined) return;
    const type = (contentType ?? '').split(';')[0]!.trim();
    // Media types compare without their parameters (application/…+json;version=3.0 is application/…+json).
    const declared = Object.keys(response.content ?? {}).find((t) => t.split(';')[0]!.trim() === type);
    if (!declared) throw new Error(`${method} ${path} → ${status} does not declare ${type}`);
    if (type !== 'application/json' && type !== 'application/geo+json') return;
    const pointer = `doc#/paths/${path.replace(/~/g, '~0').replace(/\//g, '~1')}/${method.toLowerCase()}/responses/${status}/content/${declared.replace(/~/g, '~0').replace(/\//g, '~1')}/schema`;
    const validate = this.ajv.getSchema(pointer);
    if (!validate) throw new Error(`no schema at ${pointer}`);
    if (!validate(body)) {
      throw new Error(`${method} ${path} → ${status} does not fit the document: ${this.ajv.errorsText(validate.errors)}`);
    }
  }

  /** Throws unless every header the answer declares as required is there, and every declared one present fits its schema. */
  checkHeaders(method: string, path: string, status: number, headers: Headers): void {
    const declared: Record<string, any> = this.doc.paths[path]?.[method.toLowerCase()]?.responses[String(status)]?.headers ?? {};
    for (const [name, header] of Object.entries(declared)) {
      const value = headers.get(name);
      if (value === null) {
        if (header.required) throw new Error(`${method} ${path} → ${status} lacks the required header ${name}`);
        continue;
      }
      if (!header.schema) continue;
      // Headers are text: a numeric schema is about the number the text spells.
      const parsed = header.schema.type === 'integer' || header.schema.type === 'number' ? Number(value) : value;
      if (!this.ajv.validate(header.schema, parsed)) throw new Error(`${method} ${path} → ${status} header ${name}: ${JSON.stringify(value)} ${this.ajv.errorsText()}`);
    }
  }
}
