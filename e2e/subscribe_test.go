package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/internal/testkit"
)

// subscribe runs `nats sub subject args...` as user in the background, as
// NATS runs the command line, and returns once every NATS node would
// deliver a message on subject to it: what is published after reaches it.
// wait returns what it printed once it has exited. subscribe fails t if the
// command ends first, or the nodes do not all know of the subscription
// within half a minute.
func subscribe(t *testing.T, c *Cluster, user, subject string, args ...string) (wait func() string) {
	t.Helper()
	name := "e2e-sub-" + randomHex(4) // the connection's name, to find it on the nodes
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	run := c.NATSCommand(ctx, user, append([]string{"--connection-name", name, "sub", subject}, args...)...)
	out := make(chan string, 1)
	go func() {
		s, _ := run()
		out <- s
	}()
	var monitors []string
	for _, u := range strings.Split(c.NATSURL(), ",") {
		monitors = append(monitors, strings.Replace(strings.Replace(u, "nats://", "http://", 1), ":4222", ":8222", 1))
	}
	testkit.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		select {
		case s := <-out:
			t.Fatalf("nats sub %s as %s ended before it subscribed: %s", subject, user, s)
		default:
		}
		return subscribed(monitors, name, subject)
	})
	return func() string { return <-out }
}

// subscribed tells whether every node, asked at its monitoring address,
// delivers subject to the connection called name: the node the connection
// is on lists its subscription, and every other node's route from that node
// carries the interest (nats-server's connz and routez). The nats command
// line prints nothing once it has subscribed, so the nodes are asked.
func subscribed(monitors []string, name, subject string) error {
	holder := "" // the id of the node the connection is on
	for _, m := range monitors {
		var cz connz
		if err := getJSON(m+"/connz?subs=1", &cz); err != nil {
			return err
		}
		if slices.ContainsFunc(cz.Conns, func(c connInfo) bool { return c.Name == name && slices.Contains(c.Subs, subject) }) {
			holder = cz.ID
		}
	}
	if holder == "" {
		return fmt.Errorf("no NATS node lists connection %s subscribed to %s", name, subject)
	}
	for _, m := range monitors {
		var rz routez
		if err := getJSON(m+"/routez?subs=1", &rz); err != nil {
			return err
		}
		if rz.ID != holder && !slices.ContainsFunc(rz.Routes, func(r routeInfo) bool { return r.RemoteID == holder && slices.Contains(r.Subs, subject) }) {
			return fmt.Errorf("NATS node %s does not route %s to node %s yet", rz.ID, subject, holder)
		}
	}
	return nil
}

// connz and routez are what subscribed reads of a node's /connz and
// /routez.
type (
	connz struct {
		ID    string     `json:"server_id"`
		Conns []connInfo `json:"connections"`
	}
	connInfo struct {
		Name string   `json:"name"`
		Subs []string `json:"subscriptions_list"`
	}
	routez struct {
		ID     string      `json:"server_id"`
		Routes []routeInfo `json:"routes"`
	}
	routeInfo struct {
		RemoteID string   `json:"remote_id"`
		Subs     []string `json:"subscriptions_list"`
	}
)

// getJSON decodes what url answers.
func getJSON(url string, v any) error {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}
