// The bench's clients of the local engines (dynalite, fauxqs, kinesalite)
// and a dynalite of its own with the sessions table.

package bench

import (
	"context"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
)

// localAWS is the AWS configuration of a local engine's clients.
func localAWS(hc *http.Client) aws.Config {
	return aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""), HTTPClient: hc}
}

// localDynamo is a DynamoDB client of the local engine at endpoint.
func localDynamo(endpoint string, hc *http.Client) *dynamodb.Client {
	return dynamodb.NewFromConfig(localAWS(hc), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// startDynalite starts a dynalite (its log in dir) holding the sessions
// table (schema.DefaultTableName) and returns it, which the caller stops,
// with a client of it over hc.
func (r *runner) startDynalite(ctx context.Context, dir string, hc *http.Client) (*enginetest.Process, *dynamodb.Client, error) {
	dyn, err := enginetest.NewDynalite(enginetest.Options{Root: r.cfg.Root, LogDir: dir})
	if err != nil {
		return nil, nil, err
	}
	if err := dyn.Start(); err != nil {
		return nil, nil, err
	}
	ddb := localDynamo(dyn.Endpoint(), hc)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := sessionitem.CreateTable(cctx, ddb, schema.DefaultTableName); err != nil {
		dyn.Stop()
		return nil, nil, err
	}
	return dyn, ddb, nil
}
